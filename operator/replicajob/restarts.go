package replicajob

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// backoffLimit is the number of restarts the job survives.
func backoffLimit(policy v1beta1.RunPolicy) int32 {
	if policy.BackoffLimit != nil {
		return *policy.BackoffLimit
	}
	return v1beta1.DefaultBackoffLimit
}

// countRestarts counts each retryable failure once, by pod UID, and fails the job when a restart
// would go past backoffLimit. Restarts the kubelet did in place (OnFailure, Always) count too.
func (e *Reconciler) countRestarts(replicas []*replica, policy v1beta1.RunPolicy, status *v1beta1.JobStatus, now metav1.Time) []event {
	limit := backoffLimit(policy)
	total := int32(0)
	for _, rs := range status.ReplicaStatuses {
		total += rs.Recreated
	}
	for _, r := range replicas {
		if r.pod != nil {
			total += inPlaceRestarts(r.pod, e.Framework.Kind().Container)
		}
	}
	if total > limit {
		msg := fmt.Sprintf("containers restarted %d times, more than backoffLimit %d", total, limit)
		fail(status, "BackoffLimitExceeded", msg, now)
		return []event{{kind: corev1.EventTypeWarning, reason: "BackoffLimitExceeded", action: "Fail", note: msg}}
	}

	var events []event
	for _, r := range replicas {
		if r.pod == nil || r.verdict.Outcome != Retryable || slices.Contains(status.CountedFailures, r.pod.UID) {
			continue
		}
		why := r.verdict.Describe(r.name)
		if total+1 > limit {
			msg := fmt.Sprintf("%s; restarting it would exceed backoffLimit %d", why, limit)
			fail(status, "BackoffLimitExceeded", msg, now)
			return append(events, event{kind: corev1.EventTypeWarning, reason: "BackoffLimitExceeded", action: "Fail", note: msg, related: r.pod})
		}
		total++
		status.CountedFailures = append(status.CountedFailures, r.pod.UID)
		replicaStatus(status, r.group.Type).Recreated++
		msg := fmt.Sprintf("%s; recreating it (restart %d of backoffLimit %d)", why, total, limit)
		setCondition(status, v1beta1.JobRestarting, metav1.ConditionTrue, "RetryableFailure", msg, now)
		events = append(events, event{kind: corev1.EventTypeWarning, reason: "Restarting", action: "Restart", note: msg, related: r.pod})
	}
	return events
}

func inPlaceRestarts(pod *corev1.Pod, container string) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			return cs.RestartCount
		}
	}
	return 0
}

// restart deletes the pods whose failure is counted; their replacements are created once the
// cache shows them gone, under the same name.
func (e *Reconciler) restart(ctx context.Context, replicas []*replica, status *v1beta1.JobStatus) error {
	for _, r := range replicas {
		if r.pod == nil || !slices.Contains(status.CountedFailures, r.pod.UID) || r.pod.DeletionTimestamp != nil {
			continue
		}
		// The UID precondition keeps a stale view from deleting the replacement.
		err := e.Client.Delete(ctx, r.pod, client.Preconditions{UID: &r.pod.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting failed pod %s: %w", r.name, err)
		}
	}
	return nil
}
