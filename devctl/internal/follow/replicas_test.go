package follow

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// pod is a replica pod of job "j" in the state the kubelet reports.
func pod(uid, replica string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	typ, index, _ := strings.Cut(replica, "-")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "j-" + replica, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(time.Unix(1000, 0)),
			Labels: map[string]string{"mlkube.io/job-name": "j", "mlkube.io/replica-type": typ, "mlkube.io/replica-index": index},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func waiting(reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	}
}

func running(restarts int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow", RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
}

func exited(code int32, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
}

func lastExit(code int32, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}
	}
}

func deleting(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}

func TestPodState(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"just created", pod("a", "worker-0"), "Pending"},
		{"container creating", pod("a", "worker-0", waiting("ContainerCreating", "")), "Pending"},
		// What the job's Running condition says once for every replica it applies to.
		{"image not pulled", pod("a", "worker-0", waiting("ErrImagePull", `failed to pull image "x"`)), "Pending"},
		{"image pull backing off", pod("a", "worker-0", waiting("ImagePullBackOff", `Back-off pulling image "x"`)), "Pending"},
		{"unschedulable", pod("a", "worker-0", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
		}), "Pending"},
		{"config error", pod("a", "worker-0", waiting("CreateContainerConfigError", `secret "x" not found`)), "Pending (CreateContainerConfigError)"},
		{"running", pod("a", "worker-0", running(0)), "Running"},
		{"exit 0", pod("a", "master-0", exited(0, "Completed")), "Succeeded (exit code 0)"},
		{"exit 1", pod("a", "worker-0", exited(1, "Error")), "Failed (exit code 1, Error)"},
		{"exit 137 while the pod is still Running", pod("a", "worker-0", exited(137, "Error"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), "Failed (exit code 137, Error)"},
		{"oom", pod("a", "worker-0", exited(137, "OOMKilled")), "Failed (exit code 137, OOMKilled)"},
		{"evicted", pod("a", "worker-0", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "low on memory"
		}), "Failed (Evicted: low on memory)"},
		{"being deleted", pod("a", "ps-0", running(0), deleting), "Terminating"},
		{"crash loop", pod("a", "worker-0", waiting("CrashLoopBackOff", "back-off 10s"), lastExit(1, "Error")), "Pending (CrashLoopBackOff)"},
	} {
		if got := PodState(tc.pod).String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestReplicaTransitions(t *testing.T) {
	r := newReplicaTracker()
	var got []string
	see := func(p *corev1.Pod, deleted bool) {
		for _, l := range r.observe(ReplicaOf(p), p, deleted) {
			got = append(got, ReplicaOf(p)+"  "+l)
		}
	}
	see(pod("a", "worker-1"), false)
	see(pod("a", "worker-1", waiting("ContainerCreating", "")), false) // nothing worth a line
	see(pod("a", "worker-1", running(0)), false)
	see(pod("a", "worker-1", running(0)), false) // a resync: no change
	see(pod("a", "worker-1", exited(137, "Error")), false)
	see(pod("a", "worker-1", exited(137, "Error"), deleting), false)
	see(pod("a", "worker-1", exited(137, "Error"), deleting), true)
	see(pod("b", "worker-1"), false) // recreated
	see(pod("a", "worker-1", exited(137, "Error")), true)
	see(pod("b", "worker-1", running(0)), false)
	see(pod("b", "worker-1", running(1), lastExit(143, "Error")), false) // restarted in place
	see(pod("b", "worker-1", exited(0, "Completed")), false)
	see(pod("c", "ps-0", running(0)), false)
	see(pod("c", "ps-0", running(0), deleting), false)
	see(pod("c", "ps-0", exited(0, "Completed"), deleting), false)
	see(pod("c", "ps-0", exited(0, "Completed"), deleting), true)

	want := []string{
		"worker-1  Pending",
		"worker-1  Pending -> Running",
		"worker-1  Running -> Failed (exit code 137, Error)",
		"worker-1  Failed -> Deleted",
		"worker-1  Deleted -> Pending (new pod)",
		"worker-1  Pending -> Running",
		"worker-1  restarted in place after exit code 143, Error (restart 1)",
		"worker-1  Running -> Succeeded (exit code 0)",
		"ps-0  Running",
		"ps-0  Running -> Terminating",
		"ps-0  Terminating -> Succeeded (exit code 0)",
		"ps-0  Succeeded -> Deleted",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAllStarted(t *testing.T) {
	job := &v1beta1.TfJob{Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
		{TfReplicaType: v1beta1.TfReplicaMaster}, {TfReplicaType: v1beta1.TfReplicaWorker, Replicas: 2},
	}}}
	names := ReplicaNames(job)
	if strings.Join(names, ",") != "master-0,worker-0,worker-1" {
		t.Fatalf("ReplicaNames = %v", names)
	}
	r := newReplicaTracker()
	r.observe("master-0", pod("a", "master-0", running(0)), false)
	r.observe("worker-0", pod("b", "worker-0", exited(0, "Completed")), false) // ran and finished
	r.observe("worker-1", pod("c", "worker-1", waiting("ErrImagePull", "")), false)
	if r.allStarted(names) {
		t.Error("all started while worker-1 has not pulled its image")
	}
	r.observe("worker-1", pod("c", "worker-1", running(0)), false)
	if !r.allStarted(names) {
		t.Error("not all started once worker-1 runs")
	}
}

func TestPrinter(t *testing.T) {
	job := &v1beta1.TfJob{Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
		{TfReplicaType: v1beta1.TfReplicaMaster}, {TfReplicaType: v1beta1.TfReplicaWorker, Replicas: 2}, {TfReplicaType: v1beta1.TfReplicaPS, Replicas: 1},
	}}}
	p := NewPrinter(job, false, false)
	for _, tc := range []struct{ got, want string }{
		{p.LogLine("master-0", "converged"), "master-0 | converged\n"},
		{p.LogLine("ps-0", "serving"), "ps-0     | serving\n"},
		{p.StateLine("worker-1", "%s -> %s", "Pending", "Running"), "worker-1  Pending -> Running\n"},
		{p.StateLine(p.JobLabel(), "phase %s", "Running"), "tfjob     phase Running\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
	c := NewPrinter(job, true, false)
	if got := c.LogLine("worker-0", "x"); got != "\x1b[32mworker-0\x1b[0m | x\n" {
		t.Errorf("coloured: %q", got)
	}
	if got := c.LogLine("worker-1", "x"); got != "\x1b[33mworker-1\x1b[0m | x\n" {
		t.Errorf("worker-1 has its own colour: %q", got)
	}
	if got := c.StateLine("worker-0", "Running"); got != "worker-0  Running\n" {
		t.Errorf("state lines coloured without stateColor: %q", got)
	}

	// An MXJob's: its replicas in spec order, the job's lines as mxjob.
	mx := &v1beta1.MXJob{Spec: v1beta1.MXJobSpec{ReplicaSpecs: []v1beta1.MXReplicaSpec{
		{MXReplicaType: v1beta1.MXReplicaScheduler}, {MXReplicaType: v1beta1.MXReplicaServer, Replicas: 2}, {MXReplicaType: v1beta1.MXReplicaWorker, Replicas: 1},
	}}}
	if got, want := strings.Join(ReplicaNames(mx), " "), "scheduler-0 server-0 server-1 worker-0"; got != want {
		t.Errorf("ReplicaNames = %s, want %s", got, want)
	}
	m := NewPrinter(mx, false, false)
	for _, tc := range []struct{ got, want string }{
		{m.LogLine("server-1", "applied 10 gradients"), "server-1    | applied 10 gradients\n"},
		{m.StateLine(m.JobLabel(), "phase %s", "Running"), "mxjob        phase Running\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

// The state and the log of a replica are its job's container's: tensorflow for a TfJob's pod,
// mxnet for an MXJob's, as the pod's mlkube.io/job-kind label says (and, without the label,
// whichever of the two the pod has).
func TestTheJobsContainerDecides(t *testing.T) {
	mxPod := func(labeled bool) *corev1.Pod {
		p := pod("u1", "server-0")
		if labeled {
			p.Labels["mlkube.io/job-kind"] = "mxjob"
		}
		p.Spec.Containers = []corev1.Container{{Name: "sidecar"}, {Name: "mxnet"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "mxnet", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}},
		}
		return p
	}
	for _, labeled := range []bool{true, false} {
		p := mxPod(labeled)
		if s := PodState(p); s.String() != "Failed (exit code 3, Error)" {
			t.Errorf("labeled %v: state %s, want the mxnet container's", labeled, s)
		}
		if opts := jobwatch.Options(p, false, time.Time{}); opts.Container != "mxnet" {
			t.Errorf("labeled %v: the log of container %q, want mxnet", labeled, opts.Container)
		}
	}
	if opts := jobwatch.Options(pod("u2", "worker-0"), true, time.Time{}); opts.Container != "tensorflow" {
		t.Errorf("a TfJob's pod: the log of container %q, want tensorflow", opts.Container)
	}
}
