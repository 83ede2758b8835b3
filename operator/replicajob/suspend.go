package replicajob

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// runPolicy.suspend follows Kubernetes Jobs' rules, which queueing systems (Kueue) build on:
// a suspended job has its unfinished pods deleted and none created; those deletions are no
// failures (no restart is counted), while restarts counted before stay; status.startTime is
// cleared, so the activeDeadlineSeconds clock starts again when the job resumes. Finished pods
// stay, as a Job's succeeded pods do: a replica that already succeeded is not run again.

// resumeWait is how soon to look again while pods the suspension deleted are still going.
const resumeWait = time.Second

// suspend decides for a suspended job: its unfinished pods go, and its status says it is
// suspended, and, for a job in Kueue's queue, what the queue says.
func (e *Reconciler) suspend(p *pass) {
	container := e.Framework.Kind().Container
	status := p.status
	kept := make([]*replica, 0, len(p.replicas))
	p.doomed.why = "suspending"
	deleting := 0
	for _, r := range p.replicas {
		k := *r
		if r.pod != nil && !finishedPod(r.pod, container) {
			deleting++
			k.pod = nil
			if r.pod.DeletionTimestamp == nil {
				p.doomed.objs = append(p.doomed.objs, r.pod)
			}
		}
		kept = append(kept, &k)
	}
	reason, msg := "Suspended", "runPolicy.suspend is true: the job keeps no running pods and creates none until it is false"
	note := fmt.Sprintf("runPolicy.suspend is true: deleted %s; none is created until it is false", count(deleting, "unfinished pod"))
	if q := p.queue; q != nil {
		reason, msg = q.reason, q.message
		note = q.message
		if deleting > 0 {
			note = fmt.Sprintf("%s; deleted %s", q.message, count(deleting, "unfinished pod"))
		}
	}
	first := !meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobSuspended) ||
		meta.FindStatusCondition(status.Conditions, v1beta1.JobSuspended).Reason != reason
	summarize(container, p.groups, kept, status, false, nil, p.now)
	status.StartTime = nil
	status.Phase = v1beta1.JobPhaseSuspended
	setCondition(status, v1beta1.JobSuspended, metav1.ConditionTrue, reason, msg, p.now)
	// The Running condition's reason is `kubectl get -o wide`'s Reason column: Queued or
	// Evicted there tells a job Kueue holds from one its user suspended.
	setCondition(status, v1beta1.JobRunning, metav1.ConditionFalse, reason, "the job is suspended", p.now)
	if first {
		p.events = append(p.events, event{kind: corev1.EventTypeNormal, reason: reason, action: "Suspend", note: note})
	}
}

// resume ends a suspension once the pods it deleted are gone, saying so in status and an event,
// and is true; until then it says how soon to look again (the replicas keep their names, so a
// new pod cannot be created while the old one terminates).
func resume(p *pass) bool {
	going := 0
	for _, r := range p.replicas {
		if r.pod != nil && r.pod.DeletionTimestamp != nil {
			going++
		}
	}
	if going > 0 {
		setCondition(p.status, v1beta1.JobSuspended, metav1.ConditionTrue, "Resuming",
			fmt.Sprintf("runPolicy.suspend is false: waiting for %s the suspension deleted to go, then creating the replicas", count(going, "pod")), p.now)
		p.result.RequeueAfter = resumeWait
		return false
	}
	setCondition(p.status, v1beta1.JobSuspended, metav1.ConditionFalse, "Resumed", "runPolicy.suspend is false: the replicas are created again", p.now)
	p.status.Phase = v1beta1.JobPhaseCreating
	p.events = append(p.events, event{kind: corev1.EventTypeNormal, reason: "Resumed", action: "Resume",
		note: "runPolicy.suspend is false: creating the replicas; activeDeadlineSeconds counts from now"})
	return true
}
