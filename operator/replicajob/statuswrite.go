package replicajob

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// countsHold is how long a job's status may lag behind its pods when all that changed is a
// count (pending 3 -> 4 while a job's pods come up). Conditions, phase, state, restarts and
// every decision are written at once; counts are batched, so a large job costs a few status
// writes instead of one per pod event.
const countsHold = time.Second

// writeStatus writes the status as a merge patch against base, the job as read. The patch
// carries base's resourceVersion: a job read from a stale cache fails with a conflict and is
// reconciled again, so a decision is never written twice from an outdated view.
func (e *Reconciler) writeStatus(ctx context.Context, job, base ctrl.Object, status *v1beta1.JobStatus, now metav1.Time) error {
	status.ObservedGeneration = job.GetGeneration()
	patch := ctrl.MergeFromWithOptions(base, ctrl.MergeFromWithOptimisticLock{})
	if err := e.Client.Status().Patch(ctx, job, patch); err != nil {
		return err
	}
	if old, ok := base.(v1beta1.Job); ok {
		countTransitions(e.Framework.Kind().Name, job.GetNamespace(), job.GetCreationTimestamp().Time, old.JobStatus(), status, now.Time)
	}
	e.jobs.of(job).lastWrite = now.Time
	return nil
}

// holdBack says how long to wait before writing status, when only counts changed since the
// last write and that write was less than countsHold ago; 0 means write now.
func holdBack(mem *memory, written, status *v1beta1.JobStatus, now metav1.Time) time.Duration {
	if !countsOnly(written, status) || mem.lastWrite.IsZero() {
		return 0
	}
	return countsHold - now.Sub(mem.lastWrite)
}

// countsOnly is true when a and b differ in nothing but per-type pod counts and their summary.
func countsOnly(a, b *v1beta1.JobStatus) bool {
	strip := func(s *v1beta1.JobStatus) *v1beta1.JobStatus {
		c := s.DeepCopy()
		c.Replicas = ""
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
