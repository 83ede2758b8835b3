package replicajob_test

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The master exiting 0 ends the job with success even though parameter servers still run;
// cleanPodPolicy Running deletes those and keeps the finished pods for their logs.
func TestMasterSuccessEndsJobAndCleansRunningPods(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "ok")))
	waitPods(t, ns, podNames("ok")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("ok")...)
	kl.Exit("ok-worker-0", 0, "Completed")
	// Worker 1's exit is reported before its pod's phase turns terminal; it is finished all
	// the same and must be kept.
	kl.Terminated("ok-worker-1", 0, "Completed")
	waitJob(t, ns, "ok", "workers done, job still running", func(j *v1beta1.TfJob) error {
		if rs := replicaStatus(j, "WORKER"); rs.Succeeded != 2 || j.Status.State != v1beta1.JobStateRunning {
			return errorf("state %s worker status %+v", j.Status.State, rs)
		}
		return nil
	})
	kl.Exit("ok-master-0", 0, "Completed")

	job := waitJob(t, ns, "ok", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	if c := condition(job, v1beta1.JobSucceeded); c == nil || c.Status != "True" || c.Reason != "MasterSucceeded" {
		t.Errorf("Succeeded condition %+v", c)
	}
	if c := condition(job, v1beta1.JobRunning); c == nil || c.Status != "False" {
		t.Errorf("Running condition %+v, want False once done", c)
	}
	if job.Status.CompletionTime == nil {
		t.Error("completionTime not set")
	}
	waitPods(t, ns, "ok-master-0", "ok-worker-0", "ok-worker-1")
	eventually(t, "the job's service deleted", func() error {
		if n := len(listServices(t, ns)); n != 0 {
			return errorf("%d services left", n)
		}
		return nil
	})
	waitEvent(t, ns, "ok", "Succeeded", "master 0 exited 0")
}

// Without a master, worker 0 decides.
func TestWorkerZeroDecidesWithoutMaster(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), newJob(ns, "w", replicaGroup(v1beta1.TfReplicaWorker, 2), replicaGroup(v1beta1.TfReplicaPS, 1))))
	waitPods(t, ns, "w-worker-0", "w-worker-1", "w-ps-0")
	kl := kubelet{T: t, NS: ns}
	kl.Running("w-worker-0", "w-worker-1", "w-ps-0")
	kl.Exit("w-worker-1", 0, "Completed")
	waitJob(t, ns, "w", "worker 1 alone does not end the job", func(j *v1beta1.TfJob) error {
		if replicaStatus(j, "WORKER").Succeeded != 1 {
			return errorf("worker status %+v", replicaStatus(j, "WORKER"))
		}
		return inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning)(j)
	})
	kl.Exit("w-worker-0", 0, "Completed")
	job := waitJob(t, ns, "w", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	if c := condition(job, v1beta1.JobSucceeded); c.Reason != "WorkerSucceeded" {
		t.Errorf("Succeeded reason %q", c.Reason)
	}
	waitPods(t, ns, "w-worker-0", "w-worker-1")
}

// Exit codes 1-127 are the program's own error: the job fails at once, and the event names
// the pod and the code.
func TestPermanentExitFailsJob(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "bad")))
	waitPods(t, ns, podNames("bad")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("bad")...)
	kl.Exit("bad-worker-1", 1, "Error")

	job := waitJob(t, ns, "bad", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	c := condition(job, v1beta1.JobFailed)
	if c == nil || c.Reason != "ExitCode" || c.Message != "worker 1 failed first: pod bad-worker-1 exited with code 1 (Error; permanent: 1-127): the job failed" {
		t.Errorf("Failed condition %+v", c)
	}
	if job.Status.Restarts != 0 {
		t.Errorf("restarts %d after a permanent failure", job.Status.Restarts)
	}
	ev := waitEvent(t, ns, "bad", "Failed", "bad-worker-1", "code 1")
	if ev.Type != "Warning" || ev.Related == nil || ev.Related.Name != "bad-worker-1" {
		t.Errorf("event %+v, want a Warning related to the pod", ev)
	}
	// cleanPodPolicy Running: the failed pod stays for its logs, running ones go.
	waitPods(t, ns, "bad-worker-1")
}

// OOMKilled exits 137 like a preemption, but a retry would run out of memory again.
func TestOOMKilledIsPermanent(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "oom")))
	waitPods(t, ns, podNames("oom")...)
	kubelet{T: t, NS: ns}.Exit("oom-ps-0", 137, "OOMKilled")
	job := waitJob(t, ns, "oom", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	if c := condition(job, v1beta1.JobFailed); c.Reason != "OOMKilled" {
		t.Errorf("Failed condition %+v", c)
	}
	waitEvent(t, ns, "oom", "Failed", "oom-ps-0", "code 137", "OOMKilled")
	if job.Status.Restarts != 0 {
		t.Errorf("restarts %d", job.Status.Restarts)
	}
}

// restartPolicy Never: even a retryable code fails the job.
func TestRestartPolicyNever(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	w := replicaGroup(v1beta1.TfReplicaWorker, 1)
	w.RestartPolicy = v1beta1.RestartPolicyNever
	must(t, k8s.Create(context.Background(), newJob(ns, "never", w)))
	waitPods(t, ns, "never-worker-0")
	kubelet{T: t, NS: ns}.Exit("never-worker-0", 143, "Error")
	waitJob(t, ns, "never", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	waitEvent(t, ns, "never", "Failed", "never-worker-0", "code 143", "restartPolicy Never")
}

func TestCleanPodPolicyAllAndNone(t *testing.T) {
	for _, tc := range []struct {
		policy v1beta1.CleanPodPolicy
		left   []string
		svcs   int
	}{
		{v1beta1.CleanPodPolicyAll, nil, 0},
		{v1beta1.CleanPodPolicyNone, podNames("c"), 1},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			ns := namespace(t)
			startOperator(t, ns)
			job := standardJob(ns, "c")
			job.Spec.RunPolicy.CleanPodPolicy = tc.policy
			must(t, k8s.Create(context.Background(), job))
			waitPods(t, ns, podNames("c")...)
			kl := kubelet{T: t, NS: ns}
			kl.Running(podNames("c")...)
			kl.Exit("c-master-0", 0, "Completed")
			waitJob(t, ns, "c", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
			waitPods(t, ns, tc.left...)
			if n := len(listServices(t, ns)); n != tc.svcs {
				t.Errorf("%d services left, want %d", n, tc.svcs)
			}
		})
	}
}

func TestActiveDeadlineFailsJobAndStopsPods(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "slow")
	job.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](2)
	// None would keep running pods; a deadline stops them anyway.
	job.Spec.RunPolicy.CleanPodPolicy = v1beta1.CleanPodPolicyNone
	must(t, k8s.Create(context.Background(), job))
	waitPods(t, ns, podNames("slow")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("slow")...)
	kl.Exit("slow-worker-1", 0, "Completed")

	job = waitJob(t, ns, "slow", "failed by deadline", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	c := condition(job, v1beta1.JobFailed)
	if c.Reason != "DeadlineExceeded" {
		t.Errorf("Failed condition %+v", c)
	}
	if took := job.Status.CompletionTime.Sub(job.Status.StartTime.Time).Seconds(); took < 2 || took > 4 {
		t.Errorf("failed %.1fs after start, deadline 2s", took)
	}
	waitPods(t, ns, "slow-worker-1")
	waitEvent(t, ns, "slow", "DeadlineExceeded", "activeDeadlineSeconds (2s)")
}

func TestTTLDeletesFinishedJob(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := newJob(ns, "ttl", replicaGroup(v1beta1.TfReplicaWorker, 1))
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](1)
	must(t, k8s.Create(context.Background(), job))
	waitPods(t, ns, "ttl-worker-0")
	kubelet{T: t, NS: ns}.Exit("ttl-worker-0", 0, "Completed")
	waitJob(t, ns, "ttl", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	eventually(t, "job deleted after its TTL", func() error {
		var list v1beta1.TfJobList
		must(t, k8s.List(context.Background(), &list))
		for _, j := range list.Items {
			if j.Namespace == ns {
				return errorf("job still there, completed %v", j.Status.CompletionTime)
			}
		}
		return nil
	})
}
