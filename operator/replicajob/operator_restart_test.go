package replicajob_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// An operator stopped and started mid-job finds its pods by name and creates no duplicates;
// a failure that happened while it was down is counted exactly once.
func TestOperatorRestartMidJob(t *testing.T) {
	ns := namespace(t)
	stop := startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "resume")))
	before := waitPods(t, ns, podNames("resume")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("resume")...)
	waitJob(t, ns, "resume", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	stop()

	kl.Exit("resume-worker-0", 137, "Error")
	startOperator(t, ns)
	eventually(t, "worker 0 recreated, nothing else touched", func() error {
		pods := listPods(t, ns)
		if len(pods) != 5 {
			return errorf("%d pods", len(pods))
		}
		for name, p := range pods {
			recreated := p.UID != before[name].UID
			if recreated != (name == "resume-worker-0") {
				return errorf("pod %s recreated=%v", name, recreated)
			}
		}
		return nil
	})
	if n := len(listServices(t, ns)); n != 1 {
		t.Errorf("%d services after the restart, want 1, the job's", n)
	}
	job := waitJob(t, ns, "resume", "restart counted once", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 1 || len(j.Status.CountedFailures) != 0 {
			return errorf("restarts %d counted %v", j.Status.Restarts, j.Status.CountedFailures)
		}
		return nil
	})
	if job.Status.StartTime == nil || !job.Status.StartTime.Equal(getJob(t, ns, "resume").Status.StartTime) {
		t.Error("startTime changed")
	}
}

// The operator records a restart in status before it deletes the pod. If it dies between
// the two, the next one finds the failure already counted and only finishes the restart.
func TestCountedFailureIsNotCountedTwice(t *testing.T) {
	ns := namespace(t)
	stop := startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "crash")))
	pods := waitPods(t, ns, podNames("crash")...)
	waitJob(t, ns, "crash", "created", func(j *v1beta1.TfJob) error {
		if condition(j, v1beta1.JobCreated) == nil {
			return errorf("not yet")
		}
		return nil
	})
	stop()

	// What a killed operator leaves: the failure counted in status, the pod not yet deleted.
	failed := pods["crash-ps-1"]
	kubelet{T: t, NS: ns}.Exit("crash-ps-1", 137, "Error")
	must(t, retry(func() error {
		var job v1beta1.TfJob
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "crash"}, &job); err != nil {
			return err
		}
		job.Status.CountedFailures = append(job.Status.CountedFailures, failed.UID)
		for i := range job.Status.ReplicaStatuses {
			if job.Status.ReplicaStatuses[i].Type == "PS" {
				job.Status.ReplicaStatuses[i].Recreated = 1
			}
		}
		return k8s.Status().Update(context.Background(), &job)
	}))

	startOperator(t, ns)
	eventually(t, "ps-1 recreated", func() error {
		if p, ok := listPods(t, ns)["crash-ps-1"]; !ok || p.UID == failed.UID {
			return errorf("not yet")
		}
		return nil
	})
	job := waitJob(t, ns, "crash", "counted once", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 1 || len(j.Status.CountedFailures) != 0 {
			return errorf("restarts %d counted %v", j.Status.Restarts, j.Status.CountedFailures)
		}
		return nil
	})
	if n := len(listPods(t, ns)); n != 5 {
		t.Errorf("%d pods", n)
	}
	for _, e := range events(t, ns, "crash") {
		if e.Reason == "Restarting" {
			t.Errorf("restart announced again by the second operator: %s", e.Note)
		}
	}
	_ = job
}
