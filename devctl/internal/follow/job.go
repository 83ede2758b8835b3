package follow

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// jobTracker remembers what was said about the job's status, so that only changes are printed.
type jobTracker struct {
	seen       bool
	status     v1beta1.JobStatus
	conditions map[string]metav1.Condition
	// waiting is the line of the Running condition of a Waiting job, not yet said: the replicas
	// it names grow as each pod meets the same wall, a moment apart, so it is said once it has
	// settled (follower.run), and again only when it says something else.
	waiting, saidWaiting string
}

func newJobTracker() *jobTracker { return &jobTracker{conditions: map[string]metav1.Condition{}} }

// observe takes the job's status as it is now and returns what changed in its status, in words: "phase
// Creating -> Running", "Restarting=True (RetryableFailure): pod x-worker-1 exited with code
// 137 ...", "restarts 0 -> 1", "TensorBoard at http://...".
func (j *jobTracker) observe(status *v1beta1.JobStatus) []string {
	var lines []string
	prev, cur := j.status, *status
	first := !j.seen
	j.seen = true
	j.status = *cur.DeepCopy()

	if cur.Phase != prev.Phase && cur.Phase != "" {
		lines = append(lines, "phase "+arrow(string(prev.Phase), string(cur.Phase)))
	}
	if cur.State != prev.State && cur.State != "" {
		lines = append(lines, "state "+arrow(string(prev.State), string(cur.State)))
	}
	if cur.Restarts != prev.Restarts && !(first && cur.Restarts == 0) {
		lines = append(lines, fmt.Sprintf("restarts %d -> %d", prev.Restarts, cur.Restarts))
	}
	if cur.Stalls != prev.Stalls && !(first && cur.Stalls == 0) {
		lines = append(lines, fmt.Sprintf("stalls %d -> %d", prev.Stalls, cur.Stalls))
	}
	j.waiting = ""
	for _, c := range cur.Conditions {
		old, had := j.conditions[c.Type]
		j.conditions[c.Type] = c
		if cur.State == v1beta1.JobStateWaiting && c.Type == v1beta1.JobRunning {
			if line := FormatCondition(c); line != j.saidWaiting {
				j.waiting = line
			}
			continue
		}
		if had && old.Status == c.Status && old.Reason == c.Reason && (old.Message == c.Message || quietCondition(c)) {
			continue
		}
		lines = append(lines, FormatCondition(c))
	}
	if tb := cur.Tensorboard; tb != nil {
		old := prev.Tensorboard
		if old == nil || old.URL != tb.URL || old.ProxyPath != tb.ProxyPath {
			lines = append(lines, fmt.Sprintf("TensorBoard at %s in the cluster; from here: kubectl proxy, then http://127.0.0.1:8001%s", tb.URL, tb.ProxyPath))
		}
		if tb.Ready && (old == nil || !old.Ready) {
			lines = append(lines, "TensorBoard ready")
		}
	}
	return lines
}

// sayWaiting returns the Waiting job's line once it has settled; "" when there is none to say.
func (j *jobTracker) sayWaiting() string {
	line := j.waiting
	j.waiting = ""
	if line != "" {
		j.saidWaiting = line
	}
	return line
}

// quietCondition is a condition whose message changes too often to print each time: the Running
// condition's "waiting for <pod> (<why>)" follows every replica, which the replica lines show;
// a True Progressing condition may follow every report, which the progress line shows. A False
// one, a stall, is always said.
func quietCondition(c metav1.Condition) bool {
	switch {
	case c.Type == v1beta1.JobRunning:
		return c.Status == metav1.ConditionFalse && c.Reason == "ReplicasNotRunning"
	case c.Type == v1beta1.JobProgressing:
		return c.Status == metav1.ConditionTrue
	}
	return false
}

// FormatCondition is one condition in a line: "Failed=True (ExitCode): pod x-worker-0 exited
// with code 1 (Error; permanent: 1-127): the job failed".
func FormatCondition(c metav1.Condition) string {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

func arrow(from, to string) string {
	if from == "" {
		return to
	}
	return from + " -> " + to
}

// Ended says whether the job has succeeded or failed.
func Ended(job client.Object) bool {
	s := StatusOf(job).State
	return s == v1beta1.JobStateSucceeded || s == v1beta1.JobStateFailed
}

// Condition returns the job's condition of type typ, or nil.
func Condition(job client.Object, typ string) *metav1.Condition {
	status := StatusOf(job)
	for i := range status.Conditions {
		if status.Conditions[i].Type == typ {
			return &status.Conditions[i]
		}
	}
	return nil
}
