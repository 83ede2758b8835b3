package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests follow jobs on a real kube-apiserver with the operator running in-process. There
// is no kubelet: the tests write the pod statuses a kubelet would, and fakeLogs stands in for the
// logs a kubelet would serve (the e2e suite streams real ones).

var k8s client.Client

func TestMain(m *testing.M) { jobtest.Main(m, func() { k8s = jobtest.Client }) }

func namespace(t *testing.T) string { t.Helper(); return jobtest.Namespace(t) }

func startOperator(t *testing.T, ns string) { t.Helper(); jobtest.StartOperator(t, ns) }

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	jobtest.Eventually(t, what, cond)
}

func group(typ v1beta1.TfReplicaType, replicas int32) v1beta1.TfReplicaSpec {
	return v1beta1.TfReplicaSpec{TfReplicaType: typ, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}},
	}}}
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	must(t, err)
	return &p
}

// setStatus plays the kubelet: it writes a pod's status.
func setStatus(t *testing.T, ns, name string, mutate func(*corev1.Pod)) {
	t.Helper()
	jobtest.Kubelet{T: t, NS: ns}.Update(name, mutate)
}

func runningStatus(p *corev1.Pod) {
	running(p.Status.ContainerStatuses[0].RestartCount)(p)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
}

func fixStatuses(p *corev1.Pod) {
	if len(p.Status.ContainerStatuses) == 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow"}}
	}
	cs := &p.Status.ContainerStatuses[0]
	cs.Image, cs.ImageID, cs.ContainerID = "mlkube/trainer:test", "docker://sha256:0", "containerd://"+p.Name
}

func markRunning(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		setStatus(t, ns, n, func(p *corev1.Pod) { fixStatuses(p); runningStatus(p); fixStatuses(p) })
	}
}

func markExited(t *testing.T, ns, name string, code int32, reason string) {
	t.Helper()
	setStatus(t, ns, name, func(p *corev1.Pod) { exited(code, reason)(p); fixStatuses(p) })
}

// fakeLogs serves each pod's log as the kubelet would, with timestamps: the lines of its UID.
// A pod listed in breakOnce gets its first stream cut after one line, with an error that is
// not the end of the log.
type fakeLogs struct {
	// container is the container whose log is asked for; "" means tensorflow.
	container string
	mu        sync.Mutex
	lines     map[types.UID][]string
	breakOnce map[string]bool
	opens     []string
}

func (f *fakeLogs) set(uid types.UID, base time.Time, lines ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range lines {
		f.lines[uid] = append(f.lines[uid], base.Add(time.Duration(i)*time.Millisecond).UTC().Format(time.RFC3339Nano)+" "+l)
	}
}

func (f *fakeLogs) Open(_ context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	since := ""
	if opts.SinceTime != nil {
		since = " since " + opts.SinceTime.UTC().Format(time.RFC3339)
	}
	f.opens = append(f.opens, fmt.Sprintf("%s follow=%v%s", pod.Name, opts.Follow, since))
	container := f.container
	if container == "" {
		container = "tensorflow"
	}
	if !opts.Timestamps || opts.Container != container {
		return nil, fmt.Errorf("want timestamps of the %s container, got %+v", container, opts)
	}
	all := strings.Join(f.lines[pod.UID], "\n") + "\n"
	if f.breakOnce[pod.Name] {
		delete(f.breakOnce, pod.Name)
		first, _, _ := strings.Cut(all, "\n")
		return io.NopCloser(io.MultiReader(strings.NewReader(first+"\n"), errReader{})), nil
	}
	// The kubelet's SinceTime has one-second steps: it resends the lines of that second.
	return io.NopCloser(strings.NewReader(all)), nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// syncBuffer is a bytes.Buffer safe for the writers of Follow.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A job with a retryable failure: every state change is told once, in order; each run's log is
// read once, the recreated pod's from its start, and a broken stream resumes without repeating.
func TestFollowAJobThroughARestart(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	ctx := context.Background()
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "retry"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
		group(v1beta1.TfReplicaMaster, 1), group(v1beta1.TfReplicaWorker, 2), group(v1beta1.TfReplicaPS, 1),
	}}}
	must(t, k8s.Create(ctx, job))

	logs := &fakeLogs{lines: map[types.UID][]string{}, breakOnce: map[string]bool{"retry-master-0": true}}
	var out, status syncBuffer
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Follow(ctx, Options{
			Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true,
			States: true, Status: &status, Logs: logs, Out: &out, Window: 10 * time.Millisecond, Drain: 2 * time.Second,
		})
		done <- result{res, err}
	}()

	names := []string{"retry-master-0", "retry-worker-0", "retry-worker-1", "retry-ps-0"}
	var first *corev1.Pod
	eventually(t, "pods created", func() error {
		for _, n := range names {
			if getPod(t, ns, n) == nil {
				return fmt.Errorf("no pod %s", n)
			}
		}
		return nil
	})
	base := time.Now()
	for i, n := range names {
		p := getPod(t, ns, n)
		logs.set(p.UID, base.Add(time.Duration(i)*10*time.Millisecond), n+" line 1", n+" line 2")
		if n == "retry-worker-1" {
			first = p
		}
	}
	// Every replica seen Pending before it runs, so that the transitions are all told.
	eventually(t, "the pods seen pending", func() error {
		for _, n := range []string{"master-0  Pending\n", "worker-0  Pending\n", "worker-1  Pending\n", "ps-0      Pending\n"} {
			if !strings.Contains(status.String(), n) {
				return fmt.Errorf("no %q yet", n)
			}
		}
		return nil
	})
	markRunning(t, ns, names...)
	eventually(t, "every replica started", func() error {
		if !strings.Contains(status.String(), "all 4 replicas have started") {
			return errors.New("not said yet")
		}
		return nil
	})
	markExited(t, ns, "retry-worker-1", 137, "Error")
	var second *corev1.Pod
	eventually(t, "worker-1 recreated", func() error {
		if second = getPod(t, ns, "retry-worker-1"); second == nil || second.UID == first.UID {
			return errors.New("not yet")
		}
		return nil
	})
	logs.set(second.UID, time.Now(), "retry-worker-1 second run")
	markRunning(t, ns, "retry-worker-1")
	markExited(t, ns, "retry-master-0", 0, "Completed")

	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Follow did not return after the job succeeded; states:\n%s", status.String())
	}
	must(t, r.err)
	if !r.res.Ended || r.res.Deleted || StatusOf(r.res.Job).State != v1beta1.JobStateSucceeded || r.res.AllStarted <= 0 {
		t.Errorf("result %+v, state %s", r.res, StatusOf(r.res.Job).State)
	}
	states := status.String()
	t.Logf("states:\n%s\nlogs:\n%s\nopened: %v", states, out.String(), logs.opens)
	inOrder(t, states,
		"master-0  Pending",
		"master-0  Pending -> Running",
		"tfjob     all 4 replicas have started",
		"worker-1  Running -> Failed (exit code 137, Error)",
		"tfjob     Restarting=True (RetryableFailure): pod retry-worker-1 exited with code 137 (Error; retryable: 128-255); recreating it (restart 1 of backoffLimit 3)",
		"worker-1  Deleted -> Pending (new pod)",
		"worker-1  Pending -> Running",
		"master-0  Running -> Succeeded (exit code 0)",
		"tfjob     state Running -> Succeeded",
		"tfjob     Succeeded=True (MasterSucceeded): job succeeded: master 0 exited 0",
	)
	if !strings.Contains(states, "tfjob     restarts 0 -> 1") {
		t.Error("the restart count was not told")
	}
	for _, n := range names {
		short := strings.TrimPrefix(n, "retry-")
		for _, l := range []string{" line 1", " line 2"} {
			if c := strings.Count(out.String(), fmt.Sprintf("%-8s | %s%s\n", short, n, l)); c != 1 {
				t.Errorf("%q printed %d times, want once", n+l, c)
			}
		}
	}
	if c := strings.Count(out.String(), "worker-1 | retry-worker-1 second run\n"); c != 1 {
		t.Errorf("the recreated pod's line printed %d times, want once", c)
	}
	reopened := false
	for _, o := range logs.opens {
		reopened = reopened || strings.HasPrefix(o, "retry-master-0") && strings.Contains(o, " since ")
	}
	if !reopened {
		t.Errorf("the broken stream of master-0 was not opened again from where it broke: %v", logs.opens)
	}
}

// An MXJob is followed the same way: its replicas by their MXNet roles, the mxnet container's
// logs and exits, the job's lines as mxjob, and its end when the scheduler exits 0. A TfJob's pod
// under the same job name is another job's, not this one's.
func TestFollowAnMXJob(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	ctx := context.Background()
	mx := func(typ v1beta1.MXReplicaType, replicas int32) v1beta1.MXReplicaSpec {
		return v1beta1.MXReplicaSpec{MXReplicaType: typ, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "mxnet", Image: "mlkube/trainer:test"}},
		}}}
	}
	job := &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mx"}, Spec: v1beta1.MXJobSpec{ReplicaSpecs: []v1beta1.MXReplicaSpec{
		mx(v1beta1.MXReplicaScheduler, 1), mx(v1beta1.MXReplicaServer, 1), mx(v1beta1.MXReplicaWorker, 1),
	}}}
	must(t, k8s.Create(ctx, job))
	// A pod labelled as a TfJob's of the same name (made by hand; a real TfJob named mx would
	// clash with this job on its service): follow must not take it for this job's.
	twin := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mx-master-0", Labels: map[string]string{
		v1beta1.LabelJobName: "mx", v1beta1.LabelJobKind: "tfjob", v1beta1.LabelReplicaType: "master", v1beta1.LabelReplicaIndex: "0",
	}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}}}}
	must(t, k8s.Create(ctx, twin))

	logs := &fakeLogs{lines: map[types.UID][]string{}, container: "mxnet"}
	var out, status syncBuffer
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Follow(ctx, Options{
			Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true,
			States: true, Status: &status, Logs: logs, Out: &out, Window: 10 * time.Millisecond, Drain: 2 * time.Second,
		})
		done <- result{res, err}
	}()
	names := []string{"mx-scheduler-0", "mx-server-0", "mx-worker-0"}
	eventually(t, "pods created", func() error {
		for _, n := range names {
			if getPod(t, ns, n) == nil {
				return fmt.Errorf("no pod %s", n)
			}
		}
		return nil
	})
	base := time.Now()
	for i, n := range names {
		logs.set(getPod(t, ns, n).UID, base.Add(time.Duration(i)*10*time.Millisecond), n+" line 1")
	}
	for _, n := range names {
		setStatus(t, ns, n, func(p *corev1.Pod) { fixNamedStatuses(p, "mxnet"); runningStatus(p); fixNamedStatuses(p, "mxnet") })
	}
	// The TfJob's master exits 1: nothing of it may show.
	eventually(t, "the TfJob's pod", func() error {
		if getPod(t, ns, "mx-master-0") == nil {
			return errors.New("not yet")
		}
		return nil
	})
	markExited(t, ns, "mx-master-0", 1, "Error")
	for _, n := range []string{"mx-worker-0", "mx-scheduler-0"} {
		setStatus(t, ns, n, func(p *corev1.Pod) { exited(0, "Completed")(p); fixNamedStatuses(p, "mxnet") })
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Follow did not return after the job succeeded; states:\n%s", status.String())
	}
	must(t, r.err)
	if !r.res.Ended || StatusOf(r.res.Job).State != v1beta1.JobStateSucceeded {
		t.Errorf("result %+v, state %s", r.res, StatusOf(r.res.Job).State)
	}
	states := status.String()
	t.Logf("states:\n%s\nlogs:\n%s\nopened: %v", states, out.String(), logs.opens)
	inOrder(t, states,
		"scheduler-0  Pending -> Running",
		"mxjob        all 3 replicas have started",
		"scheduler-0  Running -> Succeeded (exit code 0)",
		"mxjob        state Running -> Succeeded",
		"mxjob        Succeeded=True (SchedulerSucceeded)",
	)
	if strings.Contains(states, "master-0") || strings.Contains(out.String(), "master-0") {
		t.Error("the TfJob of the same name shows")
	}
	for _, n := range names {
		line := fmt.Sprintf("%-11s | %s line 1\n", strings.TrimPrefix(n, "mx-"), n)
		if c := strings.Count(out.String(), line); c != 1 {
			t.Errorf("%q printed %d times, want once", line, c)
		}
	}
}

// fixNamedStatuses is fixStatuses for a pod whose job container is name.
func fixNamedStatuses(p *corev1.Pod, name string) {
	fixStatuses(p)
	p.Status.ContainerStatuses[0].Name = name
}

func inOrder(t *testing.T, text string, want ...string) {
	t.Helper()
	rest := text
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("no %q (in this order) in:\n%s", w, text)
			return
		}
		rest = rest[i+len(w):]
	}
}

// A job deleted while followed ends the following; a job nobody acts on gets a hint.
func TestFollowEndsWhenTheJobIsDeleted(t *testing.T) {
	ns := namespace(t) // no operator: the job never gets a status
	ctx := context.Background()
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{group(v1beta1.TfReplicaWorker, 1)}}}
	must(t, k8s.Create(ctx, job))
	var status syncBuffer
	done := make(chan *Result, 1)
	go func() {
		res, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true, States: true, Status: &status, Hint: 500 * time.Millisecond})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	eventually(t, "hint", func() error {
		if !strings.Contains(status.String(), "tfjob     no status after 500ms: is the operator running? (devctl status)") {
			return fmt.Errorf("status so far: %q", status.String())
		}
		return nil
	})
	must(t, k8s.Delete(ctx, job))
	select {
	case res := <-done:
		if res == nil || !res.Deleted || res.Ended {
			t.Errorf("result %+v, want Deleted", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Follow did not return after the job was deleted")
	}

	// A job already gone, or replaced by another of the same name, is deleted at once.
	res, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true})
	must(t, err)
	if !res.Deleted {
		t.Errorf("following a job that is gone: %+v", res)
	}
}

// Following stops when its context ends, with the context's error.
func TestFollowStopsWithItsContext(t *testing.T) {
	ns := namespace(t)
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{group(v1beta1.TfReplicaWorker, 1)}}}
	must(t, k8s.Create(context.Background(), job))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || res.Ended {
		t.Errorf("Follow = %+v, %v; want the context's deadline", res, err)
	}
}

// A line without the kubelet's timestamp is the kubelet's own message, and says so.
func TestReadLogMarksTheKubeletsOwnLines(t *testing.T) {
	var out strings.Builder
	m := &Merger{Out: &out, Format: func(l Line) string { return l.Replica + " | " + l.Text + "\n" }}
	src := stringLogs("2020-01-02T03:04:05.000000001Z worker-0 step=3 done\nunable to retrieve container logs for containerd://e600c134\n")
	must(t, ReadLog(context.Background(), src, &corev1.Pod{}, "ps-0", false, m))
	m.Close()
	if want := "ps-0 | worker-0 step=3 done\nps-0 | [kubelet] unable to retrieve container logs for containerd://e600c134\n"; out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

type stringLogs string

func (s stringLogs) Open(context.Context, *corev1.Pod, *corev1.PodLogOptions) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(s))), nil
}
