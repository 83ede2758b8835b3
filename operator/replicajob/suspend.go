package replicajob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// runPolicy.suspend follows Kubernetes Jobs' rules, which queueing systems (Kueue) build on:
// a suspended job has its unfinished pods deleted and none created; those deletions are no
// failures (no restart is counted), while restarts counted before stay; status.startTime is
// cleared, so the activeDeadlineSeconds clock starts again when the job resumes. Finished pods
// stay, as a Job's succeeded pods do: a replica that already succeeded is not run again.

// resumeWait is how soon to look again while pods the suspension deleted are still going.
const resumeWait = time.Second

// holdSuspended deletes the job's unfinished pods and says in status that it is suspended.
func (e *Reconciler) holdSuspended(ctx context.Context, job, base ctrl.Object, written *v1beta1.JobStatus, groups []Replica, replicas []*replica, status *v1beta1.JobStatus, now metav1.Time) (reconcile.Result, error) {
	container := e.Framework.Kind().Container
	kept := make([]*replica, 0, len(replicas))
	deleting := 0
	for _, r := range replicas {
		k := *r
		if r.pod != nil && !finishedPod(r.pod, container) {
			deleting++
			k.pod = nil
			if r.pod.DeletionTimestamp == nil {
				err := e.Client.Delete(ctx, r.pod, ctrl.Preconditions{UID: &r.pod.UID})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					return reconcile.Result{}, fmt.Errorf("suspending: deleting pod %s: %w", r.name, err)
				}
			}
		}
		kept = append(kept, &k)
	}
	first := !meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobSuspended) ||
		meta.FindStatusCondition(status.Conditions, v1beta1.JobSuspended).Reason != "Suspended"
	summarize(container, groups, kept, status, false, nil, now)
	status.StartTime = nil
	status.Phase = v1beta1.JobPhaseSuspended
	setCondition(status, v1beta1.JobSuspended, metav1.ConditionTrue, "Suspended",
		"runPolicy.suspend is true: the job keeps no running pods and creates none until it is false", now)
	setCondition(status, v1beta1.JobRunning, metav1.ConditionFalse, "Suspended", "the job is suspended", now)
	if !equality.Semantic.DeepEqual(written, status) {
		if err := e.writeStatus(ctx, job, base, status, now); err != nil {
			return reconcile.Result{}, err
		}
	}
	if first {
		e.record(job, event{kind: corev1.EventTypeNormal, reason: "Suspended", action: "Suspend",
			note: fmt.Sprintf("runPolicy.suspend is true: deleted %s; none is created until it is false", count(deleting, "unfinished pod"))})
	}
	return reconcile.Result{}, nil
}

// resume ends a suspension once the pods it deleted are gone, saying so in status and an event;
// until then it reports how soon to look again (the replicas keep their names, so a new pod
// cannot be created while the old one terminates).
func (e *Reconciler) resume(ctx context.Context, job, base ctrl.Object, replicas []*replica, status *v1beta1.JobStatus, now metav1.Time) (time.Duration, error) {
	going := 0
	for _, r := range replicas {
		if r.pod != nil && r.pod.DeletionTimestamp != nil {
			going++
		}
	}
	if going > 0 {
		setCondition(status, v1beta1.JobSuspended, metav1.ConditionTrue, "Resuming",
			fmt.Sprintf("runPolicy.suspend is false: waiting for %s the suspension deleted to go, then creating the replicas", count(going, "pod")), now)
		return resumeWait, nil
	}
	setCondition(status, v1beta1.JobSuspended, metav1.ConditionFalse, "Resumed", "runPolicy.suspend is false: the replicas are created again", now)
	status.Phase = v1beta1.JobPhaseCreating
	if err := e.writeStatus(ctx, job, base, status, now); err != nil {
		return 0, err
	}
	e.record(job, event{kind: corev1.EventTypeNormal, reason: "Resumed", action: "Resume",
		note: "runPolicy.suspend is false: creating the replicas; activeDeadlineSeconds counts from now"})
	return 0, nil
}
