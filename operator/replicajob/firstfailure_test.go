package replicajob_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// When one rank raises and the others fail after it because their peer is gone, the job's
// failure names the rank that failed first, its node, its exit code and its last words.
func TestFailureNamesTheReplicaThatFailedFirst(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "dies")))
	pods := waitPods(t, ns, podNames("dies")...)
	if c := trainingContainer(pods["dies-worker-1"]); c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy %q, want FallbackToLogsOnError", c.TerminationMessagePolicy)
	}
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("dies")...)
	waitJob(t, ns, "dies", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))

	// Worker 1 raised; the master and worker 0 exited 1 a second later, their peer gone.
	t0 := time.Now().Truncate(time.Second)
	long := strings.Repeat("x", 80) + "\n"
	words := strings.Repeat(long, 20) + "Traceback (most recent call last):\n  File \"train.py\", line 3\nValueError: loss went NaN\n"
	exit := func(name string, at time.Time, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: msg, StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(at)}}, 0)
		}
	}
	bind(t, ns, "dies-worker-1", "node-b")
	// Its peers' kubelets report first: the engine sees the master's exit alone, and must not
	// name it before the first failure's report comes in.
	kl.Update("dies-master-0", exit("dies-master-0", t0, "RuntimeError: Connection closed by peer"))
	kl.Update("dies-worker-0", exit("dies-worker-0", t0, "RuntimeError: Connection closed by peer"))
	time.Sleep(time.Second)
	kl.Update("dies-worker-1", exit("dies-worker-1", t0.Add(-time.Second), words))

	job := waitJob(t, ns, "dies", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	f := job.Status.FirstFailure
	if f == nil || f.Replica != "worker 1" || f.Pod != "dies-worker-1" || f.Node != "node-b" || f.ExitCode == nil || *f.ExitCode != 1 || f.Judged != "permanent: 1-127" {
		t.Fatalf("firstFailure %+v", f)
	}
	if len(f.LastWords) > 1024 || !strings.HasPrefix(f.LastWords, "[...]\n") || !strings.HasSuffix(f.LastWords, "ValueError: loss went NaN") {
		t.Errorf("lastWords (%d bytes) not the tail cut at a line:\n%s", len(f.LastWords), f.LastWords)
	}
	c := condition(job, v1beta1.JobFailed)
	for _, want := range []string{"worker 1 failed first", "dies-worker-1", "code 1", "node node-b", `"ValueError: loss went NaN"`} {
		if c == nil || !strings.Contains(c.Message, want) {
			t.Errorf("Failed condition %+v lacks %q", c, want)
		}
	}
	waitEvent(t, ns, "dies", "Failed", "worker 1 failed first", "ValueError: loss went NaN")
}

// bind puts a pod on a node, as the scheduler does.
func bind(t *testing.T, ns, pod, node string) {
	t.Helper()
	var p corev1.Pod
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, &p))
	must(t, k8s.SubResource("binding").Create(context.Background(), &p, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}))
}

func trainingContainer(p corev1.Pod) corev1.Container {
	for _, c := range p.Spec.Containers {
		if c.Name == "tensorflow" {
			return c
		}
	}
	return corev1.Container{}
}
