package replicajob

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// decideOutcome reads the replicas' verdicts and records in status what follows from them:
// counted restarts, and the job's outcome. It returns the events that explain each decision.
//
// A permanent failure is judged once settled (firstfailure.go): until then it returns how long
// to wait, and no event.
func (e *Reconciler) decideOutcome(job client.Object, mem *memory, replicas []*replica, policy v1beta1.RunPolicy, status *v1beta1.JobStatus, now metav1.Time) ([]event, time.Duration) {
	decider := e.Framework.Kind().Decider(groupsOf(replicas))
	// A pod whose restart is counted is going: how it ends (a stalled job's replicas, stopped)
	// decides nothing.
	live := func(r *replica) bool { return r.pod != nil && !counted(status, r.pod.UID) }
	for _, r := range replicas {
		if live(r) && r.group.Type == decider && r.index == 0 && r.verdict.Outcome == Succeeded {
			msg := fmt.Sprintf("%s %d exited 0", strings.ToLower(decider), 0)
			succeed(status, titleCase(decider)+"Succeeded", msg, now)
			return []event{{kind: corev1.EventTypeNormal, reason: "Succeeded", action: "Complete", note: "job succeeded: " + msg, related: r.pod}}, 0
		}
	}

	if r := firstFailed(replicas, e.Framework.Kind().Container, live); r != nil {
		if wait := mem.settle(finishedAt(r, e.Framework.Kind().Container), now.Time); wait > 0 {
			return nil, wait
		}
		reason := "ExitCode"
		switch {
		case r.verdict.Reason == "OOMKilled":
			reason = "OOMKilled"
		case !r.verdict.HasExit:
			reason = "PodFailed"
		}
		status.FirstFailure = failureOf(r, e.Framework.Kind().Container)
		msg := failureMessage(r, status.FirstFailure)
		fail(status, reason, msg, now)
		return []event{{kind: corev1.EventTypeWarning, reason: "Failed", action: "Fail", note: msg, related: r.pod}}, 0
	}

	if exceeded, msg := deadlineExceeded(status, policy, now); exceeded {
		fail(status, "DeadlineExceeded", msg, now)
		return []event{{kind: corev1.EventTypeWarning, reason: "DeadlineExceeded", action: "Fail", note: msg}}, 0
	}

	return e.countRestarts(replicas, policy, status, now), 0
}

func groupsOf(replicas []*replica) []Replica {
	var groups []Replica
	for _, r := range replicas {
		if r.index == 0 {
			groups = append(groups, r.group)
		}
	}
	return groups
}

func titleCase(s string) string {
	s = strings.ToLower(s)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// finished is true once the job succeeded or failed; nothing undoes that.
func finished(status *v1beta1.JobStatus) bool {
	return status.State == v1beta1.JobStateSucceeded || status.State == v1beta1.JobStateFailed
}

func succeed(status *v1beta1.JobStatus, reason, msg string, now metav1.Time) {
	status.State = v1beta1.JobStateSucceeded
	status.CompletionTime = &now
	setCondition(status, v1beta1.JobSucceeded, metav1.ConditionTrue, reason, "job succeeded: "+msg, now)
	endConditions(status, "JobSucceeded", "the job succeeded", now)
}

func fail(status *v1beta1.JobStatus, reason, msg string, now metav1.Time) {
	status.State = v1beta1.JobStateFailed
	status.CompletionTime = &now
	setCondition(status, v1beta1.JobFailed, metav1.ConditionTrue, reason, msg, now)
	endConditions(status, "JobFailed", "the job failed", now)
}

// endConditions turns off the conditions that describe a job in progress.
func endConditions(status *v1beta1.JobStatus, reason, msg string, now metav1.Time) {
	for _, t := range []string{v1beta1.JobRunning, v1beta1.JobRestarting, v1beta1.JobCreateRefused, v1beta1.JobProgressing} {
		if slices.ContainsFunc(status.Conditions, func(c metav1.Condition) bool { return c.Type == t }) {
			setCondition(status, t, metav1.ConditionFalse, reason, msg, now)
		}
	}
}
