package replicajob

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// countsHold is how long a job's status may lag behind its pods when all that changed is a
// count (pending 3 -> 4 while a job's pods come up). Conditions, phase, state, restarts and
// every decision are written at once; counts are batched, so a large job costs a few status
// writes instead of one per pod event.
const countsHold = time.Second

// report makes the status say what the pass saw and what acting met: a refused create, why
// pods wait, the replicas' counts and phase; and whether it is worth writing yet.
func (e *Reconciler) report(ctx context.Context, p *pass) error {
	switch {
	case p.waiting > 0:
		p.result.RequeueAfter = soonest(p.result.RequeueAfter, p.waiting)
	case p.refusal != nil:
		retry := p.mem.failed(p.now.Time)
		if ev := reportRefusal(p.status, p.refusal, retry, p.now); ev != nil {
			p.events = append(p.events, *ev)
		}
		p.result.RequeueAfter = soonest(p.result.RequeueAfter, retry)
		// The refusal is worth writing now, partial view or not: the next reconciles skip the
		// creates that would find it again.
		p.unshown = false
	default:
		p.mem.passed()
		clearRefusal(p.status, p.now)
	}
	var mounts map[types.UID]stuck
	if !finished(p.status) {
		var lookAgain time.Duration
		var err error
		if mounts, lookAgain, err = e.mountFailures(ctx, p.job.GetNamespace(), p.mem, p.replicas, p.now.Time); err != nil {
			return err
		}
		p.result.RequeueAfter = soonest(p.result.RequeueAfter, lookAgain)
	}
	summarize(e.Framework.Kind().Container, p.groups, p.replicas, p.status, p.cleaning, mounts, p.now)
	e.takeProgress(p)
	if equality.Semantic.DeepEqual(p.written, p.status) {
		return nil
	}
	// Until the cache shows every pod and service this process created, the status would be
	// written from a partial view, and written again moments later: the status worth writing
	// comes with the reconciles their watch events bring, a few milliseconds later.
	if p.unshown {
		p.hold = true
		return nil
	}
	if wait := holdBack(p.mem, p.written, p.status, p.now); wait > 0 {
		p.hold = true
		p.result.RequeueAfter = soonest(p.result.RequeueAfter, wait)
		return nil
	}
	if ev := waitingEvent(p.written, p.status); ev != nil {
		p.events = append(p.events, *ev)
	}
	return nil
}

// write writes the status when it changed since it was last written, and records the pass's
// events once it is. It is the one place a job's status is written: as a merge patch against
// the job as last read or written, carrying that resourceVersion, so a job read from a stale
// cache fails with a conflict and is reconciled again, and a decision is never written twice
// from an outdated view.
func (e *Reconciler) write(ctx context.Context, p *pass) error {
	if !p.hold && !equality.Semantic.DeepEqual(p.written, p.status) {
		p.status.ObservedGeneration = p.job.GetGeneration()
		patch := ctrl.MergeFromWithOptions(p.base, ctrl.MergeFromWithOptimisticLock{})
		if err := e.Client.Status().Patch(ctx, p.job, patch); err != nil {
			if p.unreadable != "" {
				return unwritten(ctx, p.mem, err)
			}
			return err
		}
		countTransitions(e.Framework.Kind().Name, p.job.GetNamespace(), p.job.GetCreationTimestamp().Time, p.written, p.status, p.now.Time)
		p.mem.lastWrite = p.now.Time
		p.snapshot()
	}
	e.flush(p)
	return nil
}

// snapshot remembers the status as written and the job as it was then, for the next write.
func (p *pass) snapshot() {
	p.written = p.status.DeepCopy()
	p.base = p.job.DeepCopyObject().(ctrl.Object)
}

// holdBack says how long to wait before writing status, when only counts changed since the
// last write and that write was less than countsHold ago, or only counts and the reported
// progress and it was less than progressHold ago; 0 means write now.
func holdBack(mem *memory, written, status *v1beta1.JobStatus, now metav1.Time) time.Duration {
	if !countsOnly(written, status) || mem.lastWrite.IsZero() {
		return 0
	}
	hold := countsHold
	if progressChanged(written, status) {
		hold = progressHold
	}
	return hold - now.Sub(mem.lastWrite)
}

// countsOnly is true when a and b differ in nothing but per-type pod counts and their summary,
// and the reported progress.
func countsOnly(a, b *v1beta1.JobStatus) bool {
	strip := func(s *v1beta1.JobStatus) *v1beta1.JobStatus {
		c := s.DeepCopy()
		c.Replicas, c.Progress = "", nil
		for i := range c.ReplicaStatuses {
			rs := &c.ReplicaStatuses[i]
			rs.Pending, rs.Active, rs.Ready, rs.Succeeded, rs.Failed = 0, 0, 0, 0, 0
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
