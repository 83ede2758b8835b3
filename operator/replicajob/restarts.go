package replicajob

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// restarts are the pods whose failure is counted and that are not going yet; their
// replacements are created once the cache shows them gone, under the same name.
func restarts(replicas []*replica, status *v1beta1.JobStatus) deletions {
	d := deletions{why: "restarting"}
	for _, r := range replicas {
		if r.pod != nil && slices.Contains(status.CountedFailures, r.pod.UID) && r.pod.DeletionTimestamp == nil {
			d.objs = append(d.objs, r.pod)
		}
	}
	return d
}
