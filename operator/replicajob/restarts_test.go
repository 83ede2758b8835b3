package replicajob_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Exit 137 (SIGKILL, e.g. preemption) is retryable: the pod is recreated under the same name,
// the restart is counted and explained, and the job goes on to succeed.
func TestRetryableExitRecreatesPod(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "retry")))
	pods := waitPods(t, ns, podNames("retry")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("retry")...)
	waitJob(t, ns, "retry", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	kl.Exit("retry-worker-1", 137, "Error")

	eventually(t, "worker 1 recreated", func() error {
		p, ok := listPods(t, ns)["retry-worker-1"]
		if !ok || p.UID == pods["retry-worker-1"].UID {
			return errorf("old pod still there or none yet")
		}
		return nil
	})
	job := waitJob(t, ns, "retry", "restart counted", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 1 || replicaStatus(j, "WORKER").Restarts != 1 || replicaStatus(j, "WORKER").Recreated != 1 {
			return errorf("restarts %d worker %+v", j.Status.Restarts, replicaStatus(j, "WORKER"))
		}
		return nil
	})
	if c := condition(job, v1beta1.JobRestarting); c == nil || c.Status != "True" {
		t.Errorf("Restarting condition %+v while the new pod is pending", c)
	}
	if job.Status.Phase != v1beta1.JobPhaseRunning || job.Status.State != v1beta1.JobStateRunning {
		t.Errorf("phase %s state %s during a restart", job.Status.Phase, job.Status.State)
	}
	waitEvent(t, ns, "retry", "Restarting", "retry-worker-1", "code 137", "restart 1 of backoffLimit 3")

	kl.Running("retry-worker-1")
	job = waitJob(t, ns, "retry", "Restarting off again", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobRestarting); c == nil || c.Status != "False" {
			return errorf("Restarting condition %+v", c)
		}
		return nil
	})
	if len(job.Status.CountedFailures) != 0 {
		t.Errorf("countedFailures %v kept after the pod is gone", job.Status.CountedFailures)
	}
	kl.Exit("retry-master-0", 0, "Completed")
	job = waitJob(t, ns, "retry", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	if job.Status.Restarts != 1 {
		t.Errorf("restarts %d at the end, want 1", job.Status.Restarts)
	}
}

// Restarts count across the whole job; the one that would pass backoffLimit fails it.
func TestBackoffLimitExceededFailsJob(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "flaky")
	job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](1)
	must(t, k8s.Create(context.Background(), job))
	pods := waitPods(t, ns, podNames("flaky")...)
	kl := kubelet{T: t, NS: ns}
	kl.Exit("flaky-ps-0", 143, "Error")
	waitJob(t, ns, "flaky", "first restart", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 1 {
			return errorf("restarts %d", j.Status.Restarts)
		}
		return nil
	})
	eventually(t, "ps-0 recreated", func() error {
		if p, ok := listPods(t, ns)["flaky-ps-0"]; !ok || p.UID == pods["flaky-ps-0"].UID {
			return errorf("not yet")
		}
		return nil
	})
	kl.Exit("flaky-worker-0", 255, "Error")
	job = waitJob(t, ns, "flaky", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	c := condition(job, v1beta1.JobFailed)
	if c.Reason != "BackoffLimitExceeded" || c.Message != "pod flaky-worker-0 exited with code 255 (Error; retryable: 128-255); restarting it would exceed backoffLimit 1" {
		t.Errorf("Failed condition %+v", c)
	}
	if job.Status.Restarts != 1 {
		t.Errorf("restarts %d, want 1", job.Status.Restarts)
	}
	waitEvent(t, ns, "flaky", "BackoffLimitExceeded", "flaky-worker-0", "code 255")
}

// OnFailure: the kubelet restarts containers in place; those restarts count too.
func TestOnFailureCountsInPlaceRestarts(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	w := replicaGroup(v1beta1.TfReplicaWorker, 1)
	w.RestartPolicy = v1beta1.RestartPolicyOnFailure
	job := newJob(ns, "inplace", w)
	job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](2)
	must(t, k8s.Create(context.Background(), job))
	pods := waitPods(t, ns, "inplace-worker-0")
	if p := pods["inplace-worker-0"]; p.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("pod restartPolicy %s, want OnFailure", p.Spec.RestartPolicy)
	}
	kl := kubelet{T: t, NS: ns}
	kl.RestartedInPlace("inplace-worker-0", 2)
	waitJob(t, ns, "inplace", "restarts shown", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 2 || j.Status.State != v1beta1.JobStateRunning {
			return errorf("restarts %d state %s", j.Status.Restarts, j.Status.State)
		}
		return nil
	})
	kl.RestartedInPlace("inplace-worker-0", 3)
	job = waitJob(t, ns, "inplace", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	if c := condition(job, v1beta1.JobFailed); c.Reason != "BackoffLimitExceeded" {
		t.Errorf("Failed condition %+v", c)
	}
	// The running pod is cleaned up and takes its restart count along; the job keeps it.
	waitPods(t, ns)
	if job = getJob(t, ns, "inplace"); job.Status.Restarts != 3 {
		t.Errorf("restarts %d after clean-up, want 3", job.Status.Restarts)
	}
}

// A pod that fails without its container terminating (evicted) is worth a new pod.
func TestEvictedPodIsRecreated(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), newJob(ns, "ev", replicaGroup(v1beta1.TfReplicaWorker, 1))))
	pods := waitPods(t, ns, "ev-worker-0")
	kubelet{T: t, NS: ns}.Update("ev-worker-0", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.Reason = "Evicted"
	})
	eventually(t, "recreated", func() error {
		if p, ok := listPods(t, ns)["ev-worker-0"]; !ok || p.UID == pods["ev-worker-0"].UID {
			return errorf("not yet")
		}
		return nil
	})
	waitEvent(t, ns, "ev", "Restarting", "pod ev-worker-0 failed (Evicted; retryable)")
}

// One count of restarts: a replica restarted in place three times under backoffLimit 3 (the
// limit's own count, not past it), its pod then deleted (a drained node), its new pod failing
// once more. The deleted pod's restarts stay counted, so the fourth fails the job, and status,
// the condition and the event say 4.
func TestRestartsOfADeletedPodStayCounted(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	w := replicaGroup(v1beta1.TfReplicaWorker, 1)
	w.RestartPolicy = v1beta1.RestartPolicyOnFailure
	job := newJob(ns, "drained", w)
	job.Spec.RunPolicy.BackoffLimit = ptr.To[int32](3)
	must(t, k8s.Create(context.Background(), job))
	pods := waitPods(t, ns, "drained-worker-0")
	kl := kubelet{T: t, NS: ns}
	kl.RestartedInPlace("drained-worker-0", 3)
	waitJob(t, ns, "drained", "three restarts shown", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 3 || replicaStatus(j, "WORKER").InPlace != 3 || j.Status.State != v1beta1.JobStateRunning {
			return errorf("restarts %d worker %+v state %s", j.Status.Restarts, replicaStatus(j, "WORKER"), j.Status.State)
		}
		return nil
	})
	old := pods["drained-worker-0"]
	must(t, k8s.Delete(context.Background(), &old, client.GracePeriodSeconds(0)))
	eventually(t, "worker 0 made again", func() error {
		if p, ok := listPods(t, ns)["drained-worker-0"]; !ok || p.UID == old.UID {
			return errorf("not yet")
		}
		return nil
	})
	if j := getJob(t, ns, "drained"); j.Status.Restarts != 3 || j.Status.State != v1beta1.JobStateRunning {
		t.Errorf("after the pod's deletion: restarts %d state %s, want 3 and Running", j.Status.Restarts, j.Status.State)
	}
	kl.RestartedInPlace("drained-worker-0", 1)
	job = waitJob(t, ns, "drained", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	want := "containers restarted 4 times, more than backoffLimit 3"
	if c := condition(job, v1beta1.JobFailed); c == nil || c.Reason != "BackoffLimitExceeded" || c.Message != want {
		t.Errorf("Failed condition %+v, want BackoffLimitExceeded: %s", c, want)
	}
	if job.Status.Restarts != 4 {
		t.Errorf("status.restarts %d, want 4", job.Status.Restarts)
	}
	waitEvent(t, ns, "drained", "BackoffLimitExceeded", want)
}
