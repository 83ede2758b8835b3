package replicajob_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job whose trainers never report is restarted once progressDeadlineSeconds pass after every
// replica ran: its replicas together, counted as one restart. Once backoffLimit is spent, the
// next stall fails the job with reason ProgressDeadlineExceeded.
func TestStalledJobIsRestartedThenFails(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "stall")
	job.Spec.RunPolicy.ProgressDeadlineSeconds = ptr.To[int32](2)
	job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](1)
	must(t, k8s.Create(context.Background(), job))
	first := waitPods(t, ns, podNames("stall")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("stall")...)

	stalled := waitJob(t, ns, "stall", "restarted for the stall", func(j *v1beta1.TfJob) error {
		if j.Status.Stalls != 1 || j.Status.Restarts != 1 {
			return errorf("stalls %d restarts %d", j.Status.Stalls, j.Status.Restarts)
		}
		return nil
	})
	c := condition(stalled, v1beta1.JobProgressing)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ProgressDeadlineExceeded" ||
		!strings.Contains(c.Message, "progressDeadlineSeconds (2s)") || !strings.Contains(c.Message, "restart 1 of backoffLimit 1") {
		t.Errorf("Progressing condition %+v", c)
	}
	waitEvent(t, ns, "stall", "ProgressDeadlineExceeded", "no trainer reports", "restarting every replica")
	// Every replica is created again, as one restart: no group counts it.
	var again map[string]corev1.Pod
	eventually(t, "every replica recreated", func() error {
		again = listPods(t, ns)
		for _, name := range podNames("stall") {
			if p, ok := again[name]; !ok || p.UID == first[name].UID {
				return errorf("%s not recreated yet", name)
			}
		}
		return nil
	})
	for _, rs := range stalled.Status.ReplicaStatuses {
		if rs.Restarts != 0 {
			t.Errorf("group %s counts %d restarts of the stall", rs.Type, rs.Restarts)
		}
	}

	// The clock starts again when every replica runs again; backoffLimit 1 is spent.
	start := time.Now()
	kl.Running(podNames("stall")...)
	failed := waitJob(t, ns, "stall", "failed on the second stall", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("failed %v after its replicas ran again, before the deadline of 2s", took)
	}
	f := condition(failed, v1beta1.JobFailed)
	if f == nil || f.Reason != "ProgressDeadlineExceeded" || !strings.Contains(f.Message, "exceed backoffLimit 1") {
		t.Errorf("Failed condition %+v", f)
	}
}

// A job without progressDeadlineSeconds runs as long as it likes.
func TestNoProgressDeadlineNoStall(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "calm")))
	waitPods(t, ns, podNames("calm")...)
	kubelet{T: t, NS: ns}.Running(podNames("calm")...)
	waitJob(t, ns, "calm", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	time.Sleep(3 * time.Second)
	j := waitJob(t, ns, "calm", "still running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	if j.Status.Stalls != 0 || condition(j, v1beta1.JobProgressing) != nil {
		t.Errorf("stalls %d, Progressing %+v, with no deadline", j.Status.Stalls, condition(j, v1beta1.JobProgressing))
	}
}
