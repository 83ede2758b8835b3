package replicajob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job the operator cannot decode whole (v1beta1.Job.Unreadable: a number past its field's
// range, stored before the CRD bounded it, or a field of another type) has only its metadata
// and status here, so nothing is done to it: no pod created, deleted or restarted, no TTL. It
// stops no other job either: the lists of its kind decode the rest whole. It says why, once:
// a Warning event and the condition Unreadable, naming the field; the gauge
// mlkube_jobs_unreadable counts it until it reads whole again or is deleted.

// countUnreadable counts an unreadable job in the gauge, once.
func (m *memory) countUnreadable(kind, namespace string) {
	if m.counted == nil {
		m.counted = []string{kind, namespace}
		unreadableJobs.WithLabelValues(m.counted...).Inc()
	}
}

// sayUnreadable decides what to say of an unreadable job, once for each thing it says.
func sayUnreadable(p *pass) {
	msg := fmt.Sprintf("cannot read %s; %s", p.unreadable, v1beta1.UnreadableHint)
	if p.mem.unreadable == msg {
		return
	}
	p.mem.unreadable = msg
	if c := meta.FindStatusCondition(p.status.Conditions, v1beta1.JobUnreadable); c != nil && c.Status == metav1.ConditionTrue && c.Message == msg {
		return // said by an operator before this one
	}
	p.events = append(p.events, event{kind: corev1.EventTypeWarning, reason: "Unreadable", action: "Read", note: msg})
	setCondition(p.status, v1beta1.JobUnreadable, metav1.ConditionTrue, "DecodeFailed", msg, p.now)
}

// unwritten is what a failed status write of an unreadable job returns.
func unwritten(ctx context.Context, mem *memory, err error) error {
	if apierrors.IsConflict(err) {
		mem.unreadable = "" // said again with the newer version
		return err
	}
	// The status itself may be what cannot be written back (the CRD refuses what it holds):
	// the event has said it, and retrying would say nothing new.
	log.FromContext(ctx).Info("the condition Unreadable could not be written; the event says it", "error", err)
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
