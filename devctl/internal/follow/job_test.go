package follow

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestJobChanges(t *testing.T) {
	j := newJobTracker()
	var got []string
	see := func(s v1beta1.JobStatus) {
		got = append(got, j.observe(&s)...)
	}
	cond := func(typ, status, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
	}
	created := cond("Created", "True", "ReplicasCreated", "created 3 pods and their services")
	see(v1beta1.JobStatus{})
	see(v1beta1.JobStatus{Phase: "Creating", State: "Running", Conditions: []metav1.Condition{
		created, cond("Running", "False", "ReplicasNotRunning", "waiting for j-worker-0 (Pending)"),
	}})
	see(v1beta1.JobStatus{Phase: "Creating", State: "Running", Conditions: []metav1.Condition{
		created, cond("Running", "False", "ReplicasNotRunning", "waiting for j-worker-1 (ContainerCreating)"), // quiet
	}})
	see(v1beta1.JobStatus{Phase: "Running", State: "Running", Conditions: []metav1.Condition{
		created, cond("Running", "True", "ReplicasRunning", "every replica is running or done"),
	}})
	see(v1beta1.JobStatus{Phase: "Running", State: "Running", Restarts: 1, Conditions: []metav1.Condition{
		created, cond("Running", "True", "ReplicasRunning", "every replica is running or done"),
		cond("Restarting", "True", "RetryableFailure", "pod j-worker-1 exited with code 137 (Error; retryable: 128-255); recreating it (restart 1 of backoffLimit 3)"),
	}})
	see(v1beta1.JobStatus{Phase: "Failed", State: "Failed", Restarts: 1, Conditions: []metav1.Condition{
		created, cond("Running", "False", "JobFailed", "the job failed"),
		cond("Restarting", "False", "JobFailed", "the job failed"),
		cond("Failed", "True", "ExitCode", "pod j-worker-0 exited with code 1 (Error; permanent: 1-127): the job failed"),
	}, Tensorboard: &v1beta1.TensorboardStatus{URL: "http://j-tensorboard.ns.svc", ProxyPath: "/api/v1/namespaces/ns/services/j-tensorboard:80/proxy/"}})

	want := []string{
		"phase Creating",
		"state Running",
		"Created=True (ReplicasCreated): created 3 pods and their services",
		"Running=False (ReplicasNotRunning): waiting for j-worker-0 (Pending)",
		"phase Creating -> Running",
		"Running=True (ReplicasRunning): every replica is running or done",
		"restarts 0 -> 1",
		"Restarting=True (RetryableFailure): pod j-worker-1 exited with code 137 (Error; retryable: 128-255); recreating it (restart 1 of backoffLimit 3)",
		"phase Running -> Failed",
		"state Running -> Failed",
		"Running=False (JobFailed): the job failed",
		"Restarting=False (JobFailed): the job failed",
		"Failed=True (ExitCode): pod j-worker-0 exited with code 1 (Error; permanent: 1-127): the job failed",
		"TensorBoard at http://j-tensorboard.ns.svc in the cluster; from here: kubectl proxy, then http://127.0.0.1:8001/api/v1/namespaces/ns/services/j-tensorboard:80/proxy/",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A Waiting job's reason is said once it settles, for all the replicas it names, not once for
// each replica that meets the same wall a moment after another; again only when it changes.
func TestWaitingIsSaidOnceSettled(t *testing.T) {
	j := newJobTracker()
	waitingOn := func(msg string) []string {
		return j.observe(&v1beta1.JobStatus{Phase: "Creating", State: v1beta1.JobStateWaiting, Conditions: []metav1.Condition{
			{Type: "Running", Status: "False", Reason: "ImagePullBackOff", Message: msg},
		}})
	}
	var lines []string
	lines = append(lines, waitingOn("worker-1: cannot pull x")...)
	lines = append(lines, waitingOn("worker-0..1: cannot pull x")...)
	lines = append(lines, waitingOn("worker-0..1, ps-0: cannot pull x")...)
	if want := []string{"phase Creating", "state Waiting"}; strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines before it settled:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if got, want := j.sayWaiting(), "Running=False (ImagePullBackOff): worker-0..1, ps-0: cannot pull x"; got != want {
		t.Errorf("said %q, want %q", got, want)
	}
	if got := j.sayWaiting(); got != "" {
		t.Errorf("said again: %q", got)
	}
	waitingOn("worker-0..1, ps-0: cannot pull x")
	if got := j.sayWaiting(); got != "" {
		t.Errorf("the same reason said twice: %q", got)
	}
	waitingOn("worker-0..1, ps-0: cannot pull y")
	if got := j.sayWaiting(); !strings.Contains(got, "cannot pull y") {
		t.Errorf("a new reason not said: %q", got)
	}
}

// A stall is said with its message, and the count of stalls; the True Progressing condition,
// whose message may follow every report, is said once (the progress line shows the reports).
func TestStallsAreSaid(t *testing.T) {
	j := newJobTracker()
	var got []string
	see := func(stalls int32, status, reason, msg string) {
		got = append(got, j.observe(&v1beta1.JobStatus{Phase: "Running", State: "Running", Stalls: stalls, Conditions: []metav1.Condition{
			{Type: v1beta1.JobProgressing, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg},
		}})...)
	}
	see(0, "True", "Reported", "step 10 from j-worker-0")
	see(0, "True", "Reported", "step 20 from j-worker-0")
	see(1, "False", "ProgressDeadlineExceeded", "no larger step for 60s: restarting every replica (restart 1 of backoffLimit 3)")
	see(1, "True", "Reported", "step 30 from j-worker-0")
	want := []string{
		"phase Running",
		"state Running",
		"Progressing=True (Reported): step 10 from j-worker-0",
		"stalls 0 -> 1",
		"Progressing=False (ProgressDeadlineExceeded): no larger step for 60s: restarting every replica (restart 1 of backoffLimit 3)",
		"Progressing=True (Reported): step 30 from j-worker-0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
