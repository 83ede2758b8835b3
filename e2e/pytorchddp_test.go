//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

const ddpDir = "../samples/pytorch-ddp"

// ddpImage is the PyTorch sample's image on its way: built by samples/pytorch-ddp/build.sh
// (Debian's python3-torch, cached in Docker by its package versions), then loaded into the
// three-node cluster with devctl load, both in the background while the suite does other work.
type ddpImage struct {
	tag           string
	build, load   ddpStep
	built, loaded chan struct{} // closed when each step ends
}

// ddpStep is a command the image took: its output, duration and error.
type ddpStep struct {
	out  string
	took time.Duration
	err  error
}

// startDDPImage starts the build. A test that ends early still waits for it: no debootstrap
// outlives the suite.
func startDDPImage(t *testing.T) *ddpImage {
	d := &ddpImage{built: make(chan struct{}), loaded: make(chan struct{})}
	go func() {
		defer close(d.built)
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(ddpDir, "build.sh"))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		d.tag, d.build = strings.TrimSpace(stdout.String()), ddpStep{stderr.String(), time.Since(start), err}
	}()
	t.Cleanup(func() { <-d.built })
	return d
}

// loadInto loads the image, once built, into the cluster's pod nodes, unless the cluster could
// not be made (upErr). The test waits for it before the cluster's deletion.
func (d *ddpImage) loadInto(cluster string, upErr error, devctlMulti func(...string) (string, time.Duration, error)) {
	defer close(d.loaded)
	<-d.built
	switch {
	case upErr != nil:
		d.load.err = fmt.Errorf("no cluster to load it into (%v)", upErr)
	case d.build.err != nil:
		d.load.err = errors.New("the image was not built")
	default:
		d.load.out, d.load.took, d.load.err = devctlMulti("load", "--name", cluster, d.tag)
	}
}

// ready waits for the image in the nodes and gives its tag.
func (d *ddpImage) ready(t *testing.T) string {
	t.Helper()
	<-d.built
	t.Logf("$ samples/pytorch-ddp/build.sh  (%.1fs, err=%v)\n%s", d.build.took.Seconds(), d.build.err, d.build.out)
	if d.build.err != nil || d.tag == "" {
		t.Fatalf("samples/pytorch-ddp/build.sh failed (%v): its output above says why", d.build.err)
	}
	timing("samples/pytorch-ddp/build.sh: the PyTorch image (in the background)", d.build.took)
	<-d.loaded
	if d.load.err != nil {
		t.Fatalf("devctl load %s: %v", d.tag, d.load.err)
	}
	if strings.Contains(d.load.out, "✓ Loaded ") {
		timing("devctl load of the PyTorch image into 2 nodes (in the background)", d.load.took)
	}
	return d.tag
}

// pytorchDDP runs the PyTorch sample, Debian's real torch, on the three-node cluster: DDP over
// gloo started with env:// and with torchrun, each with its ranks on both workers, the loss
// falling and every rank ending with the same parameters; a rank killed once (exit 137) restarted
// and the job succeeding; a rank exiting 1 failing the job. The four jobs run at once, after
// devctl load has put the image into the nodes.
func pytorchDDP(t *testing.T, c client.Client, cs kubernetes.Interface, workers []string, image *ddpImage,
	devctlMulti func(...string) (string, time.Duration, error)) {
	image.ready(t)
	r := ddpRunner{c: c, cs: cs, devctl: devctlMulti}
	t.Run("started with init_method env", func(t *testing.T) {
		t.Parallel()
		r.succeeds(t, "ddp-env", "job.yaml", "env://")
	})
	t.Run("started by torchrun", func(t *testing.T) {
		t.Parallel()
		r.succeeds(t, "ddp-torchrun", "job-torchrun.yaml", "torchrun")
	})
	t.Run("the master killed once (exit 137) is restarted", func(t *testing.T) {
		t.Parallel()
		ns := "e2e-nodes-ddp-retry"
		job := sampleJob(t, "job.yaml")
		limit := int32(6)
		job.Spec.RunPolicy.BackoffLimit = &limit
		// The master fails at step 5 once: the marker is on a hostPath of the node it is held
		// to, so its pod, created again there, finds it. The workers lose their peer and exit
		// 142 (retryable) too; all three come back and train from the start.
		master := &job.Spec.ReplicaSpecs[0].Template.Spec
		master.NodeSelector = map[string]string{corev1.LabelHostname: workers[0]}
		setEnv(master, "FAIL_RANK", "0", "FAIL_EXIT_CODE", "137", "FAIL_AT_STEP", "5", "FAIL_ONCE_FILE", "/once/"+ns)
		master.Containers[0].VolumeMounts = append(master.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "once", MountPath: "/once"})
		dirOrCreate := corev1.HostPathDirectoryOrCreate
		master.Volumes = append(master.Volumes, corev1.Volume{Name: "once", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/mlkube-e2e-ddp", Type: &dirOrCreate}}})
		out, got := r.run(t, ns, "the master killed once, restarted", job, 0)
		r.trained(t, ns, job.Name, "env://")
		if got.Status.Restarts < 1 {
			t.Errorf("status.restarts %d after the master exited 137, want at least 1", got.Status.Restarts)
		}
		matches(t, "devctl run's output", out,
			`(?m)^pytorchjob +Restarting=True \(RetryableFailure\): pod pytorch-ddp-master-0 exited with code 137 \(Error; retryable: 128-255\); recreating it \(restart \d of backoffLimit 6\)$`,
			`(?m)^master-0 +\| rank 0: step 5: exiting with code 137 on purpose`,
			// Its second life: the marker is there, and it trains on.
			`(?m)^master-0 +\| rank 0: step 5: /once/`+ns+` exists, so no failure this time$`)
	})
	t.Run("a worker raising an exception fails the job, named with its last words", func(t *testing.T) {
		t.Parallel()
		r.raises(t)
	})
	t.Run("a rank that hangs once is caught by the progress deadline", func(t *testing.T) {
		t.Parallel()
		r.hangs(t, workers)
	})
}

// raises runs the sample with worker 1 (rank 2) raising a Python exception at step 5: the job's
// condition and devctl run name that worker, its node, exit code 1 and the exception's last
// line, while the other ranks' exits after it (142, their peer gone) do not mask it.
func (r ddpRunner) raises(t *testing.T) {
	ns := "e2e-nodes-ddp-fail"
	job := sampleJob(t, "job.yaml")
	setEnv(&job.Spec.ReplicaSpecs[1].Template.Spec, "RAISE_RANK", "2", "RAISE_AT_STEP", "5")
	out, got := r.run(t, ns, "a worker raising, the job failed", job, 1)
	f := got.Status.FirstFailure
	if f == nil || f.Replica != "worker 1" || f.Pod != "pytorch-ddp-worker-1" || f.Node == "" || f.ExitCode == nil || *f.ExitCode != 1 ||
		!strings.Contains(f.LastWords, "Traceback") || !strings.Contains(f.LastWords, "ValueError") {
		t.Fatalf("firstFailure %+v, want worker 1's exit 1 with its traceback", f)
	}
	lines := strings.Split(f.LastWords, "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "ValueError: ") || !strings.Contains(last, "on purpose") {
		t.Errorf("the last words end %q, want the exception's line", last)
	}
	failed := meta.FindStatusCondition(got.Status.Conditions, "Failed")
	msg := "worker 1 failed first: pod pytorch-ddp-worker-1 exited with code 1 (Error; permanent: 1-127) on node " + f.Node + ": the job failed"
	if got.Status.State != v1beta1.JobStateFailed || failed == nil || failed.Reason != "ExitCode" ||
		!strings.HasPrefix(failed.Message, msg) || !strings.Contains(failed.Message, strconv.Quote(last)) {
		t.Errorf("job state %s, Failed condition %+v; want Failed=True (ExitCode): %s; its last words: %q", got.Status.State, failed, msg, last)
	}
	contains(t, "devctl run's output", out, "first failure: worker 1 (pod pytorch-ddp-worker-1, node "+f.Node+"): exit code 1", last)
}

// hangs runs the sample with rank 1 (worker 0) sleeping inside its training loop at step 10,
// once: the others block in their collective, every pod stays Running, and only the progress
// its rank 0 reports stops. progressDeadlineSeconds (20, under gloo's own 120 s timeout)
// catches it, every replica is restarted once, and the job then succeeds.
func (r ddpRunner) hangs(t *testing.T, workers []string) {
	ns := "e2e-nodes-ddp-hang"
	const deadline = 20
	job := sampleJob(t, "job.yaml")
	job.Spec.RunPolicy.ProgressDeadlineSeconds = ptrTo(int32(deadline))
	// Its own template: the workers share the master's (a YAML anchor).
	job.Spec.ReplicaSpecs[1].Template = *job.Spec.ReplicaSpecs[1].Template.DeepCopy()
	worker := &job.Spec.ReplicaSpecs[1].Template.Spec
	// Both workers on one node, where the marker stays for worker 0's second life; the master on
	// the other, so that the gradients still cross the pod network.
	worker.NodeSelector = map[string]string{corev1.LabelHostname: workers[1]}
	worker.TopologySpreadConstraints = nil
	master := &job.Spec.ReplicaSpecs[0].Template.Spec
	master.NodeSelector = map[string]string{corev1.LabelHostname: workers[0]}
	master.TopologySpreadConstraints = nil
	setEnv(worker, "HANG_RANK", "1", "HANG_AT_STEP", "10", "HANG_ONCE_FILE", "/once/"+ns)
	worker.Containers[0].VolumeMounts = append(worker.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "once", MountPath: "/once"})
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	worker.Volumes = append(worker.Volumes, corev1.Volume{Name: "once", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/mlkube-e2e-ddp", Type: &dirOrCreate}}})
	out, got := r.run(t, ns, "a rank hanging once, caught by the progress deadline", job, 0)
	if got.Status.State != v1beta1.JobStateSucceeded || got.Status.Stalls != 1 || got.Status.Restarts != 1 {
		t.Errorf("state %s, stalls %d, restarts %d; want Succeeded after one stall", got.Status.State, got.Status.Stalls, got.Status.Restarts)
	}
	if p := got.Status.Progress; p == nil || p.Step != 60 || p.Percent == nil || *p.Percent != 100 || p.Replica != "pytorch-ddp-master-0" {
		t.Errorf("progress %+v, want step 60 of 60 from the master", p)
	}
	evs, err := r.cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	came := regexp.MustCompile(`step (\d+) from pod \S+, came at (\S+);`)
	caught := false
	for _, ev := range evs.Items {
		if ev.Reason != "ProgressDeadlineExceeded" {
			continue
		}
		m := came.FindStringSubmatch(ev.Note)
		if m == nil {
			t.Fatalf("event %q names no last step and when it came", ev.Note)
		}
		at, err := time.Parse(time.RFC3339, m[2])
		must(t, err)
		// The last step came at a whole second; the deadline plus a few seconds.
		if late := ev.EventTime.Sub(at) - deadline*time.Second; late < 0 || late > 6*time.Second {
			t.Errorf("caught %v after the deadline (step %s at %s, event at %s)", late, m[1], at, ev.EventTime.Time)
		}
		caught = true
	}
	if !caught {
		t.Errorf("no ProgressDeadlineExceeded event in %s", ns)
	}
	matches(t, "devctl run's output", out,
		`(?m)^worker-0 +\| rank 1: step 10: hanging`,
		`(?m)^pytorchjob +Progressing=False \(ProgressDeadlineExceeded\): no larger step reported in progressDeadlineSeconds \(20s\)`)
	r.trained(t, ns, job.Name, "env://")
}

func ptrTo[T any](v T) *T { return &v }

// ddpRunner runs PyTorchJobs on the three-node cluster.
type ddpRunner struct {
	c      client.Client
	cs     kubernetes.Interface
	devctl func(...string) (string, time.Duration, error)
}

// sampleJob reads one of the sample's jobs, its pods kept once it ends (their logs with them).
func sampleJob(t *testing.T, file string) *v1beta1.PyTorchJob {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ddpDir, file))
	must(t, err)
	var job v1beta1.PyTorchJob
	if err := yaml.UnmarshalStrict(data, &job); err != nil {
		t.Fatalf("%s/%s: %v", ddpDir, file, err)
	}
	job.Spec.RunPolicy.CleanPodPolicy = v1beta1.CleanPodPolicyNone
	return &job
}

// setEnv adds name, value pairs to the env of the template's first container.
func setEnv(spec *corev1.PodSpec, pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		spec.Containers[0].Env = append(spec.Containers[0].Env, corev1.EnvVar{Name: pairs[i], Value: pairs[i+1]})
	}
}

// run runs job with devctl run in a namespace of its own, checks devctl's exit code, and returns
// devctl's output and the job as it ended.
func (r ddpRunner) run(t *testing.T, ns, what string, job *v1beta1.PyTorchJob, wantCode int) (string, *v1beta1.PyTorchJob) {
	t.Helper()
	ctx := context.Background()
	must(t, r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	job.APIVersion, job.Kind = v1beta1.GroupVersion.String(), "PyTorchJob"
	data, err := yaml.Marshal(job)
	must(t, err)
	path := filepath.Join(t.TempDir(), "job.yaml")
	must(t, os.WriteFile(path, data, 0o644))
	// A job that never ends fails here in minutes, not at the suite's timeout.
	out, took, err := r.devctl("run", path, "-n", ns, "--timeout", "5m")
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("devctl run: %v", err)
	}
	if code != wantCode {
		t.Fatalf("devctl run of the PyTorchJob exited %d, want %d", code, wantCode)
	}
	timing("devctl run of a PyTorch DDP job: "+what, took)
	var got v1beta1.PyTorchJob
	must(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: job.Name}, &got))
	return out, &got
}

// succeeds runs one of the sample's jobs and checks that it succeeded and trained.
func (r ddpRunner) succeeds(t *testing.T, short, file, launcher string) {
	ns := "e2e-nodes-" + short
	job := sampleJob(t, file)
	_, got := r.run(t, ns, file+" ("+launcher+")", job, 0)
	if got.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("job state %s, want Succeeded", got.Status.State)
	}
	// Rank 0 reports its progress (samples/pytorch-ddp/progress.py): the last step reaches status.
	p := got.Status.Progress
	if p == nil || p.Step != 60 || p.TotalSteps == nil || *p.TotalSteps != 60 || p.Summary != "100%" || len(p.Metrics) != 1 || p.Metrics[0].Name != "loss" {
		t.Errorf("status.progress %+v, want step 60 of 60 (100%%) and the loss", p)
	}
	r.trained(t, ns, job.Name, launcher)
}

var (
	ddpJoined = regexp.MustCompile(`(?m)^rank (\d+): joined (\d+) ranks via (\S+) at `)
	ddpLoss   = regexp.MustCompile(`(?m)^rank (\d+): step (\d+) loss ([0-9.]+)$`)
	ddpDone   = regexp.MustCompile(`(?m)^rank (\d+): done: (\d+) steps, parameters ([0-9a-f]+)$`)
	ddpCkpt   = regexp.MustCompile(`(?m)^rank 0: step (\d+): checkpoint (\S+) \((\d+) bytes\)$`)
)

// trained checks, from the logs of the job's three pods (the last life of each), that the ranks
// met as the operator said (the rank its pod's name gives, a world of 3, by launcher), on more
// than one node and none on the control plane; that the loss fell from its first steps to its
// last; that every rank ended with the same parameters (DDP kept them in step); and that rank 0
// wrote its checkpoints.
func (r ddpRunner) trained(t *testing.T, ns, job, launcher string) {
	t.Helper()
	var pods corev1.PodList
	must(t, r.c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: job}))
	nodes := map[string]bool{}
	digests := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
		if strings.HasSuffix(p.Spec.NodeName, "control-plane") {
			t.Errorf("%s ran on the control plane %s", p.Name, p.Spec.NodeName)
		}
		want := 0 // the master; worker i is rank i+1
		if i := strings.LastIndex(p.Name, "-worker-"); i >= 0 {
			n, _ := strconv.Atoi(p.Name[i+len("-worker-"):])
			want = n + 1
		}
		log := podLog(t, r.cs, p, nil)
		joined := ddpJoined.FindStringSubmatch(log)
		if joined == nil || joined[1] != strconv.Itoa(want) || joined[2] != "3" || joined[3] != launcher {
			t.Errorf("%s: %q, want rank %d joined 3 ranks via %s; its log:\n%s", p.Name, joined, want, launcher, log)
			continue
		}
		var losses []float64
		for _, m := range ddpLoss.FindAllStringSubmatch(log, -1) {
			if m[1] != joined[1] || m[2] != strconv.Itoa(len(losses)+1) {
				t.Fatalf("%s: a loss line out of order: %q", p.Name, m[0])
			}
			l, _ := strconv.ParseFloat(m[3], 64)
			losses = append(losses, l)
		}
		if len(losses) < 20 {
			t.Errorf("%s logged %d steps' loss, want the sample's 60", p.Name, len(losses))
			continue
		}
		first, last := mean(losses[:5]), mean(losses[len(losses)-5:])
		t.Logf("%s on %s: rank %s, mean loss of the first 5 steps %.4f, of the last 5 %.4f", p.Name, p.Spec.NodeName, joined[1], first, last)
		if last > first/4 {
			t.Errorf("%s: the loss did not fall: %.4f over the first 5 steps, %.4f over the last 5", p.Name, first, last)
		}
		done := ddpDone.FindStringSubmatch(log)
		if done == nil || done[2] != strconv.Itoa(len(losses)) {
			t.Errorf("%s: no line \"done: %d steps, parameters ...\"", p.Name, len(losses))
			continue
		}
		digests[done[3]] = true
		if want == 0 {
			var steps []string
			for _, m := range ddpCkpt.FindAllStringSubmatch(log, -1) {
				steps = append(steps, m[1])
				if !strings.HasPrefix(m[2], "/checkpoints/") || m[3] == "0" {
					t.Errorf("%s: checkpoint %s of %s bytes, want one under /checkpoints (CHECKPOINT_DIR)", p.Name, m[2], m[3])
				}
			}
			if !slices.Equal(steps, []string{"20", "40", "60"}) {
				t.Errorf("rank 0 wrote checkpoints at steps %v, want 20, 40, 60", steps)
			}
		}
	}
	if len(pods.Items) != 3 {
		t.Errorf("%d pods, want a master and two workers", len(pods.Items))
	}
	if len(nodes) < 2 {
		t.Errorf("the ranks ran on %d node(s), want both workers", len(nodes))
	}
	if len(digests) != 1 {
		t.Errorf("the ranks ended with parameters %v, want one and the same on all", digests)
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
