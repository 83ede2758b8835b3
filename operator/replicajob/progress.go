package replicajob

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Progress is what the engine needs of the progress endpoint (operator/progress), where the
// trainers of a job report how far they are. Nil runs jobs without it.
type Progress interface {
	// Tell gives a replica pod's framework container c where and how to report.
	Tell(kind *v1beta1.Kind, namespace, job string, pod *corev1.Pod, c *corev1.Container)
	// Prepare readies namespace ns for reports (its copy of the endpoint's CA), before pods
	// are created there.
	Prepare(ctx context.Context, ns string) error
	// Progress is the job's progress as last reported, given what its status held (prev).
	Progress(uid types.UID, prev *v1beta1.JobProgress) (*v1beta1.JobProgress, bool)
	// Advanced is when the job's step last grew, as reported to this process; zero if never.
	Advanced(uid types.UID) time.Time
}

// progressHold is how long a status write waits when all that changed is the reported
// progress: a job's status is written for its reports at most once per progressHold, whatever
// its trainers send (the board asks for a reconcile as often, no more).
const progressHold = 10 * time.Second

// prepareProgress readies the job's namespace for its trainers' reports; where it cannot, the
// job is told once why its reports will fail, and its pods are created all the same.
func (e *Reconciler) prepareProgress(ctx context.Context, p *pass) {
	if e.Progress == nil {
		return
	}
	err := e.Progress.Prepare(ctx, p.job.GetNamespace())
	if err == nil || p.mem.progressUnavailable {
		return
	}
	p.mem.progressUnavailable = true
	e.record(p.job, event{kind: corev1.EventTypeWarning, reason: "ProgressUnavailable", action: "Create",
		note: "the trainers' progress reports will fail their TLS check: " + err.Error()})
}

// takeProgress puts the reported progress in status, and says that the job progresses.
func (e *Reconciler) takeProgress(p *pass) {
	if e.Progress == nil {
		return
	}
	prog, ok := e.Progress.Progress(p.job.GetUID(), p.status.Progress)
	if !ok {
		return
	}
	p.status.Progress = prog
	stalled := meta.FindStatusCondition(p.status.Conditions, v1beta1.JobProgressing)
	advancedSince := stalled == nil || stalled.Status == metav1.ConditionTrue ||
		prog.AdvanceTime != nil && prog.AdvanceTime.After(stalled.LastTransitionTime.Time)
	if !finished(p.status) && advancedSince {
		setCondition(p.status, v1beta1.JobProgressing, metav1.ConditionTrue, "Reporting", "the trainers report a growing step", p.now)
	}
}

// progressChanged is true when the reported progress in a and b differs.
func progressChanged(a, b *v1beta1.JobStatus) bool {
	return !equality.Semantic.DeepEqual(a.Progress, b.Progress)
}

// stall checks runPolicy.progressDeadlineSeconds. Its clock starts when every replica runs and
// starts again with each report of a larger step. When it runs out, every replica is restarted,
// counted once against backoffLimit, or the job fails when that is spent. left is when to look
// again; 0 when there is no deadline to watch.
func (e *Reconciler) stall(uid types.UID, replicas []*replica, policy v1beta1.RunPolicy, status *v1beta1.JobStatus, now metav1.Time) ([]event, time.Duration) {
	since, left, ok := e.progressClock(uid, policy, status, now)
	if !ok {
		return nil, 0
	}
	if left > 0 {
		return nil, left
	}
	why := stallMessage(status.Progress, *policy.ProgressDeadlineSeconds, since)
	limit := backoffLimit(policy)
	if total := totalRestarts(status); total+1 > limit {
		msg := fmt.Sprintf("%s; restarting the replicas would exceed backoffLimit %d: the job failed", why, limit)
		fail(status, "ProgressDeadlineExceeded", msg, now)
		setCondition(status, v1beta1.JobProgressing, metav1.ConditionFalse, "ProgressDeadlineExceeded", msg, now)
		return []event{{kind: corev1.EventTypeWarning, reason: "ProgressDeadlineExceeded", action: "Fail", note: msg}}, 0
	}
	status.Stalls++
	for _, r := range replicas {
		if r.pod != nil && (r.verdict.Outcome == Running || r.verdict.Outcome == Pending) && !counted(status, r.pod.UID) {
			status.CountedFailures = append(status.CountedFailures, r.pod.UID)
		}
	}
	msg := fmt.Sprintf("%s; restarting every replica (restart %d of backoffLimit %d)", why, totalRestarts(status), limit)
	setCondition(status, v1beta1.JobProgressing, metav1.ConditionFalse, "ProgressDeadlineExceeded", msg, now)
	setCondition(status, v1beta1.JobRestarting, metav1.ConditionTrue, "ProgressDeadlineExceeded", msg, now)
	return []event{{kind: corev1.EventTypeWarning, reason: "ProgressDeadlineExceeded", action: "Restart", note: msg}}, 0
}

// progressClock is when the progress deadline's clock last started (since) and how much of it
// is left; ok is false when the job has no deadline or not every replica runs.
func (e *Reconciler) progressClock(uid types.UID, policy v1beta1.RunPolicy, status *v1beta1.JobStatus, now metav1.Time) (since time.Time, left time.Duration, ok bool) {
	running := meta.FindStatusCondition(status.Conditions, v1beta1.JobRunning)
	if policy.ProgressDeadlineSeconds == nil || running == nil || running.Status != metav1.ConditionTrue {
		return time.Time{}, 0, false
	}
	// Times read back from status are cut to the second: the clock starts at the latest they
	// stand for, so that a deadline never runs out early.
	since = running.LastTransitionTime.Add(time.Second)
	if p := status.Progress; p != nil && p.AdvanceTime != nil && p.AdvanceTime.Add(time.Second).After(since) {
		since = p.AdvanceTime.Add(time.Second)
	}
	if e.Progress != nil {
		if t := e.Progress.Advanced(uid); t.After(since) {
			since = t
		}
	}
	left = since.Add(time.Duration(*policy.ProgressDeadlineSeconds) * time.Second).Sub(now.Time)
	if left <= 0 {
		return since, 0, true
	}
	return since, left, true
}

func counted(status *v1beta1.JobStatus, uid types.UID) bool {
	return slices.Contains(status.CountedFailures, uid)
}

func stallMessage(p *v1beta1.JobProgress, deadline int32, since time.Time) string {
	if p == nil {
		return fmt.Sprintf("no progress reported in progressDeadlineSeconds (%ds) since every replica ran at %s: no trainer reports (docs/progress.md)",
			deadline, since.UTC().Format(time.RFC3339))
	}
	came := p.ReportTime
	if p.AdvanceTime != nil {
		came = *p.AdvanceTime
	}
	return fmt.Sprintf("no larger step reported in progressDeadlineSeconds (%ds): the last, step %d from pod %s, came at %s",
		deadline, p.Step, p.Replica, came.UTC().Format(time.RFC3339))
}
