package replicajob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job the operator cannot decode whole (v1beta1.Job.Unreadable: a number past its field's
// range, stored before the CRD bounded it, or a field of another type) has only its metadata
// and status here, so nothing is done to it: no pod created, deleted or restarted, no TTL. It
// stops no other job either: the lists of its kind decode the rest whole. It says why, once:
// a Warning event and the condition Unreadable, naming the field; the gauge
// mlkube_jobs_unreadable counts it until it reads whole again or is deleted.

// holdUnreadable reports an unreadable job, once for each thing it says.
func (e *Reconciler) holdUnreadable(ctx context.Context, job v1beta1.Job, mem *memory, now metav1.Time) error {
	msg := fmt.Sprintf("cannot read %s; %s", job.Unreadable(), v1beta1.UnreadableHint)
	if mem.counted == nil {
		mem.counted = []string{e.Framework.Kind().Name, job.GetNamespace()}
		unreadableJobs.WithLabelValues(mem.counted...).Inc()
	}
	if mem.unreadable == msg {
		return nil
	}
	status := job.JobStatus()
	if c := meta.FindStatusCondition(status.Conditions, v1beta1.JobUnreadable); c != nil && c.Status == metav1.ConditionTrue && c.Message == msg {
		mem.unreadable = msg // said by an operator before this one
		return nil
	}
	e.record(job, event{kind: corev1.EventTypeWarning, reason: "Unreadable", action: "Read", note: msg})
	mem.unreadable = msg
	base := job.DeepCopyObject().(ctrl.Object)
	setCondition(status, v1beta1.JobUnreadable, metav1.ConditionTrue, "DecodeFailed", msg, now)
	err := e.writeStatus(ctx, job, base, status, now)
	if apierrors.IsConflict(err) {
		mem.unreadable = "" // said again with the newer version
		return err
	}
	if err != nil {
		// The status itself may be what cannot be written back (the CRD refuses what it holds):
		// the event has said it, and retrying would say nothing new.
		log.FromContext(ctx).Info("the condition Unreadable could not be written; the event says it", "error", err)
	}
	return nil
}

// readable turns the condition off for a job that reads whole again (fixed with kubectl edit)
// and stops counting it.
func (m *memory) readable() {
	if m.counted != nil {
		unreadableJobs.WithLabelValues(m.counted...).Dec()
	}
	m.unreadable, m.counted = "", nil
}

// clearUnreadable turns the condition False once the job reads whole again.
func clearUnreadable(status *v1beta1.JobStatus, now metav1.Time) {
	if meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobUnreadable) {
		setCondition(status, v1beta1.JobUnreadable, metav1.ConditionFalse, "Readable", "the job reads whole again", now)
	}
}
