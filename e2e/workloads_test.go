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
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests run TfJobs of the sample trainer with the real `devctl run` and `devctl logs`:
// real pods, real traffic between replicas, real exit codes, real logs. Each test has a
// namespace of its own; the cluster goes with them at the end.

// ran is what one devctl command did.
type ran struct {
	out   string
	code  int
	took  time.Duration
	lines []timedLine
}

// timedLine is a line of output and when it came, counted from the command's start.
type timedLine struct {
	at   time.Duration
	text string
}

// when is the time the first line containing s came.
func (r ran) when(s string) (time.Duration, bool) {
	for _, l := range r.lines {
		if strings.Contains(l.text, s) {
			return l.at, true
		}
	}
	return 0, false
}

// lineClock notes when each line of output comes.
type lineClock struct {
	mu      sync.Mutex
	start   time.Time
	all     bytes.Buffer
	partial []byte
	lines   []timedLine
}

func (c *lineClock) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all.Write(p)
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.lines = append(c.lines, timedLine{time.Since(c.start), string(c.partial[:i])})
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

// devctlRun runs devctl with args, stdout and stderr together as a terminal would show them.
func devctlRun(t *testing.T, args ...string) ran {
	t.Helper()
	return startDevctl(t, args...)()
}

// startDevctl starts devctl with args; wait waits for it to end.
func startDevctl(t *testing.T, args ...string) (wait func() ran) {
	t.Helper()
	clock := &lineClock{start: time.Now()}
	cmd := exec.Command(devctl, args...)
	cmd.Stdout, cmd.Stderr = clock, clock
	if err := cmd.Start(); err != nil {
		t.Fatalf("devctl %s: %v", strings.Join(args, " "), err)
	}
	return func() ran {
		t.Helper()
		err := cmd.Wait()
		clock.mu.Lock()
		r := ran{out: clock.all.String(), took: time.Since(clock.start), lines: clock.lines}
		clock.mu.Unlock()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			r.code = exit.ExitCode()
		case err != nil:
			t.Fatalf("devctl %s: %v", strings.Join(args, " "), err)
		}
		t.Logf("$ devctl %s  (%.1fs, exit %d)\n%s", strings.Join(args, " "), r.took.Seconds(), r.code, r.out)
		return r
	}
}

// newNamespace makes the test's namespace, e2e-<short>.
func newNamespace(t *testing.T, c client.Client, short string) string {
	t.Helper()
	ns := "e2e-" + short
	must(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	return ns
}

// manifest writes a TfJob manifest into the test's directory.
func manifest(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	must(t, os.WriteFile(path, []byte(strings.TrimLeft(yaml, "\n")), 0o644))
	return path
}

// trainer is the container of a replica running the sample trainer with args.
func trainer(args ...string) string {
	return fmt.Sprintf(`
        containers:
        - name: tensorflow
          image: mlkube/trainer:dev
          imagePullPolicy: IfNotPresent
          args: [%s]`, strings.Join(args, ", "))
}

// failOnce makes a trainer container fail once: it runs as root to write the marker file to a
// hostPath directory, which outlives the pod (the node is the only one).
func failOnce(marker string, args ...string) string {
	return trainer(append(args, "--exit-once-file=/once/"+marker)...) + `
          securityContext: {runAsUser: 0}
          volumeMounts: [{name: once, mountPath: /once}]
        volumes:
        - name: once
          hostPath: {path: /var/lib/mlkube-e2e, type: DirectoryOrCreate}`
}

func getJob(t *testing.T, c client.Client, ns, name string) *v1beta1.TfJob {
	t.Helper()
	var job v1beta1.TfJob
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &job))
	return &job
}

func condition(job *v1beta1.TfJob, typ string) *metav1.Condition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == typ {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func contains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func matches(t *testing.T, what, text string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(text) {
			t.Errorf("%s does not match %s", what, p)
		}
	}
}

// The distributed sample (1 master, 2 workers, 2 ps) trains for real and succeeds; devctl run
// shows every replica's log and the job's progress, and exits 0.
func TestRunTheDistributedSample(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "distributed")
	wait := startDevctl(t, "run", "../samples/tfjob-distributed.yaml", "-n", ns)
	oneServicePerJob(t, c, ns, "distributed", 5)
	r := wait()
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		// every replica's log, prefixed
		`(?m)^master-0 \| master-0 step=`, `(?m)^worker-0 \| worker-0 step=`, `(?m)^worker-1 \| worker-1 step=`,
		`(?m)^ps-0     \| ps-0 step=`, `(?m)^ps-1     \| ps-1 step=`,
		// real traffic: both parameter servers hear from both workers and the master
		`(?m)^ps-0 +\| ps-0 step=\d+ first call from worker-0`, `(?m)^ps-1 +\| ps-1 step=\d+ first call from worker-1`,
		`(?m)^ps-0 +\| ps-0 step=\d+ applied \d+ gradients`,
		// the master converged and said so
		`(?m)^master-0 \| master-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
		// states as they changed
		`(?m)^master-0  Pending -> Running$`, `(?m)^master-0  Running -> Succeeded \(exit code 0\)$`,
		`(?m)^tfjob     all 5 replicas have started \([0-9.]+s\)$`,
		`(?m)^tfjob     Succeeded=True \(MasterSucceeded\): job succeeded: master 0 exited 0$`,
		`(?m)^tfjob/distributed Succeeded in [0-9.]+s: job succeeded: master 0 exited 0$`,
	)
	if job := getJob(t, c, ns, "distributed"); job.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("job state %s", job.Status.State)
	}
	// The sample's template labels and annotations are on its pod (the master's stays: it ended).
	var master corev1.Pod
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "distributed-master-0"}, &master))
	if master.Labels["app.kubernetes.io/part-of"] != "mlkube-samples" || master.Annotations["mlkube.io/sample"] != "distributed" {
		t.Errorf("the template's label and annotation did not reach the pod: labels %v, annotations %v", master.Labels, master.Annotations)
	}
	started, ok1 := r.when("all 5 replicas have started")
	ended, ok2 := r.when("state Running -> Succeeded")
	if ok1 && ok2 {
		t.Logf("devctl run: all replicas running after %.1fs, job ended after %.1fs, devctl exited after %.1fs", started.Seconds(), ended.Seconds(), r.took.Seconds())
		timing("devctl run samples/tfjob-distributed.yaml: to all 5 replicas running", started)
		timing("devctl run samples/tfjob-distributed.yaml: to the job's end (Succeeded)", ended)
		timing("devctl run samples/tfjob-distributed.yaml: to devctl's exit", r.took)
	}
}

// A worker killed once (exit 137, as if preempted) is recreated: one restart, the recreated
// pod's log followed from its start, and the job still succeeds.
func retryableFailure(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "retry")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: retry
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:`+trainer("--step-delay=250ms")+`
  - tfReplicaType: WORKER
    replicas: 2
    template:
      spec:`+failOnce(ns+"-worker", "--step-delay=250ms", "--exit-code=137", "--exit-at-step=2")+`
  - tfReplicaType: PS
    template:
      spec:`+trainer("--step-delay=250ms")+`
`)
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	job := getJob(t, c, ns, "retry")
	if job.Status.State != v1beta1.JobStateSucceeded || job.Status.Restarts != 1 {
		t.Errorf("job state %s, restarts %d; want Succeeded after 1 restart", job.Status.State, job.Status.Restarts)
	}
	matches(t, "devctl run's output", r.out,
		`(?m)^worker-(0|1) \| worker-(0|1) step=\d+ exiting with code 137 at own step 2`,
		// Running, unless the pod's exit came in the same update as its start
		`(?m)^worker-(0|1)  (Running|Pending) -> Failed \(exit code 137, Error\)$`,
		`(?m)^worker-(0|1)  (Deleted|Failed) -> Pending \(new pod\)$`,
		`(?m)^tfjob     Restarting=True \(RetryableFailure\): pod retry-worker-(0|1) exited with code 137 \(Error; retryable: 128-255\); recreating it \(restart 1 of backoffLimit 3\)$`,
		`(?m)^tfjob     restarts 0 -> 1$`,
		`(?m)^tfjob/retry Succeeded in `,
	)
	// The recreated pod's log, from its start: it finds the marker and trains on.
	if !regexp.MustCompile(`(?m)^worker-(0|1) \| worker-(0|1) step=\d+ --exit-once-file /once/\S+ exists`).MatchString(r.out) {
		t.Logf("the recreated worker did not get to train before the job ended (no log line of its second run)")
	}
}

// A worker exiting 1 fails the job: an event names the pod and the code, and devctl run exits 1
// with the Failed condition's message.
func permanentFailure(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "fail")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: fail
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:`+trainer("--step-delay=100ms")+`
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=100ms", "--exit-code=1", "--exit-at-step=2")+`
`)
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 1 {
		t.Fatalf("devctl run exited %d, want 1", r.code)
	}
	// The failure names the replica, its node and its last words (the trainer's last line).
	const first = "worker 0 failed first: pod fail-worker-0 exited with code 1 (Error; permanent: 1-127) on node "
	failed := condition(getJob(t, c, ns, "fail"), v1beta1.JobFailed)
	if failed == nil || failed.Reason != "ExitCode" || !strings.HasPrefix(failed.Message, first) || !strings.Contains(failed.Message, ": the job failed; its last words: ") {
		t.Fatalf("Failed condition %+v, want its message to start %q and quote the last words", failed, first)
	}
	msg := failed.Message
	contains(t, "devctl run's output", r.out,
		"worker-0  Running -> Failed (exit code 1, Error)",
		"tfjob     Failed=True (ExitCode): "+msg,
		"first failure: worker 0 (pod fail-worker-0, node ",
		"error: tfjob/fail Failed after ",
	)
	if !strings.HasSuffix(strings.TrimSpace(r.out), msg) {
		t.Errorf("devctl run does not end with the Failed condition's message %q", msg)
	}
	var events corev1.EventList
	must(t, c.List(context.Background(), &events, client.InNamespace(ns)))
	found := false
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "fail" && e.Reason == "Failed" && strings.Contains(e.Message, "pod fail-worker-0 exited with code 1") &&
			e.Related != nil && e.Related.Name == "fail-worker-0" {
			found = true
		}
	}
	if !found {
		t.Errorf("no Failed event on tfjob/fail naming pod fail-worker-0 and code 1: %+v", events.Items)
	}
}

// backoffLimit 0: the first retryable failure fails the job.
func backoffLimitExceeded(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "backoff")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: backoff
spec:
  runPolicy:
    backoffLimit: 0
  replicaSpecs:
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=100ms", "--exit-code=137", "--exit-at-step=2")+`
`)
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 1 {
		t.Fatalf("devctl run exited %d, want 1", r.code)
	}
	matches(t, "devctl run's output", r.out,
		`(?m)^tfjob     Failed=True \(BackoffLimitExceeded\): pod backoff-worker-0 exited with code 137 \(Error; retryable: 128-255\); restarting it would exceed backoffLimit 0$`,
		`(?m)^error: tfjob/backoff Failed after [0-9.]+s: `,
	)
	if c := condition(getJob(t, c, ns, "backoff"), v1beta1.JobFailed); c == nil || c.Reason != "BackoffLimitExceeded" {
		t.Errorf("Failed condition %+v, want reason BackoffLimitExceeded", c)
	}
}

// activeDeadlineSeconds 5 on a job that needs longer: failed with DeadlineExceeded, its
// running pods stopped.
func activeDeadline(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "deadline")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: slow
spec:
  runPolicy:
    activeDeadlineSeconds: 5
  replicaSpecs:
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=1s")+`
`)
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 1 {
		t.Fatalf("devctl run exited %d, want 1", r.code)
	}
	contains(t, "devctl run's output", r.out,
		"tfjob     Failed=True (DeadlineExceeded): the job ran longer than activeDeadlineSeconds (5s); its running pods are stopped",
		"worker-0  Running -> Terminating",
	)
	job := getJob(t, c, ns, "slow")
	if c := condition(job, v1beta1.JobFailed); c == nil || c.Reason != "DeadlineExceeded" {
		t.Errorf("Failed condition %+v, want reason DeadlineExceeded", c)
	}
	if took := job.Status.CompletionTime.Sub(job.Status.StartTime.Time); took < 5*time.Second || took > 15*time.Second {
		t.Errorf("failed %s after its start, want 5s or a little more", took)
	}
}

// cleanPodPolicy Running keeps the pods that finished: devctl logs shows the deciding worker's
// log after the job has ended, alone or with the others.
func logsAfterTheJobEnded(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "logs")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: keep
spec:
  runPolicy:
    cleanPodPolicy: Running
  replicaSpecs:
  - tfReplicaType: WORKER
    replicas: 2
    template:
      spec:`+trainer("--step-delay=50ms")+`
  - tfReplicaType: PS
    template:
      spec:`+trainer("--step-delay=50ms")+`
`)
	if r := devctlRun(t, "run", file, "-n", ns); r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	eventually(t, time.Minute, "the ps deleted, worker-0 kept", func() error {
		var pods corev1.PodList
		must(t, c.List(context.Background(), &pods, client.InNamespace(ns)))
		names := map[string]corev1.PodPhase{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names[p.Name] = p.Status.Phase
			}
		}
		if _, ok := names["keep-ps-0"]; ok || names["keep-worker-0"] != corev1.PodSucceeded {
			return fmt.Errorf("pods %v", names)
		}
		return nil
	})

	r := devctlRun(t, "logs", "keep", "-n", ns, "--replica", "worker-0")
	if r.code != 0 {
		t.Fatalf("devctl logs exited %d", r.code)
	}
	matches(t, "devctl logs --replica worker-0", r.out,
		`^worker-0 \| worker-0 step=0 cluster=`,
		`(?m)^worker-0 \| worker-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
	)
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		if !strings.HasPrefix(l, "worker-0 | ") {
			t.Errorf("a line of another replica: %q", l)
		}
	}
	r = devctlRun(t, "logs", "keep", "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl logs exited %d", r.code)
	}
	matches(t, "devctl logs", r.out, `(?m)^worker-0 \| worker-0 step=\d+ converged`)
}

// Under restartPolicy OnFailure the kubelet restarts a failed container in place: devctl run
// says so and follows the new run's log from its start, and devctl logs --previous shows the
// run before while the pod runs (the kubelet keeps one finished run per container, so once the
// pod has finished, the first run is gone). The worker decides; the ps holds the parameters, so
// that the fault is the worker's own.
func logsPreviousAfterAnInPlaceRestart(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "previous")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: inplace
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    restartPolicy: OnFailure
    template:
      spec:`+failOnce(ns+"-worker-0", "--step-delay=200ms", "--exit-code=3", "--exit-at-step=2")+`
  - tfReplicaType: PS
    template:
      spec:`+trainer()+`
`)
	wait := startDevctl(t, "run", file, "-n", ns)
	eventually(t, time.Minute, "worker-0 running again after an in-place restart", func() error {
		var pod corev1.Pod
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "inplace-worker-0"}, &pod); err != nil {
			return err
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.RestartCount == 1 && cs.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", pod.Status.ContainerStatuses)
	})
	previous := devctlRun(t, "logs", "inplace", "-n", ns, "--replica", "worker-0", "--previous")
	r := wait()
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	contains(t, "devctl run's output", r.out,
		"worker-0  restarted in place after exit code 3, Error (restart 1)",
		"worker-0 | worker-0 step=2 exiting with code 3 at own step 2",
		"this replica failed on purpose before; going on",
		"tfjob     restarts 0 -> 1",
	)
	if n := strings.Count(r.out, "worker-0 | worker-0 step=0 cluster="); n != 2 {
		t.Errorf("the first line of worker-0's log came %d times, want twice (once per run)", n)
	}
	if previous.code != 0 {
		t.Fatalf("devctl logs --previous exited %d", previous.code)
	}
	contains(t, "devctl logs --previous", previous.out, "worker-0 | worker-0 step=2 exiting with code 3 at own step 2")
	if strings.Contains(previous.out, "going on") {
		t.Error("--previous shows the run after the restart")
	}
}

// A manifest of 2017 (snake_case) runs after conversion, the warnings printed first.
func aLegacyManifest(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "legacy")
	r := devctlRun(t, "run", "../samples/legacy/tfjob-2017.yaml", "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		`^warning: converted from mlkube.io/v1beta1 TfJob \(2017, snake_case\)`,
		`(?m)^created tfjob/legacy-2017 in namespace e2e-legacy`,
		`(?m)^master-0 \| master-0 step=\d+ converged`,
		`(?m)^tfjob/legacy-2017 Succeeded in `,
	)
}

// An invalid job is refused before anything is created: exit 2, each cause with its field.
func anInvalidJob(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "invalid")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: bad
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:`+trainer()+`
  - tfReplicaType: WORKER
    replicas: -1
    template:
      spec:`+trainer()+`
`)
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 2 {
		t.Fatalf("devctl run exited %d, want 2", r.code)
	}
	contains(t, "devctl run's output", r.out, "is invalid; nothing was created:\n  spec.replicaSpecs[1].replicas: should be greater than or equal to 1 (got -1)")
	// What only a pod's own validation would refuse, kind's apiserver refuses with the job, by
	// mlkube's admission policy, which devctl up installs: a fraction of a GPU (which devctl
	// sends as the quantity reads, 500m).
	file = manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: half-a-gpu
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    template:
      spec:`+trainer()+`
          resources:
            limits: {nvidia.com/gpu: "0.5"}
`)
	r = devctlRun(t, "run", file, "-n", ns)
	if r.code != 2 {
		t.Fatalf("devctl run of half a GPU exited %d, want 2:\n%s", r.code, r.out)
	}
	contains(t, "devctl run's output", r.out, "is invalid; nothing was created:\n  spec.replicaSpecs[WORKER].template.spec.containers[tensorflow].resources.limits[nvidia.com/gpu]: 500m is not a whole number")
	var jobs v1beta1.TfJobList
	must(t, c.List(context.Background(), &jobs, client.InNamespace(ns)))
	if len(jobs.Items) != 0 {
		t.Errorf("%d jobs created", len(jobs.Items))
	}
}
