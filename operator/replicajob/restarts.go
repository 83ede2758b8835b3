package replicajob

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// This file owns what a restart is, how many a job has had and when backoffLimit is passed.
//
// A restart is one of two things, counted per replica group:
//   - recreated: the operator deleted a pod that failed retryably (exit 128-255, evicted) and
//     made it again, counted once by the pod's UID (status.countedFailures);
//   - inPlace: the kubelet restarted the framework's container in its pod (restartPolicy
//     OnFailure or Always), counted from the container's restartCount as it grows, by pod
//     (status.countedInPlace), so that a pod deleted takes none of its restarts along.
//
// A group's restarts are the two summed, the job's restarts all groups', and that one total is
// what status shows and what backoffLimit is checked against. Unlike a Kubernetes Job, which
// counts the in-place restarts of its active pods only (a deleted pod's are forgotten), a restart
// stays counted once it happened.

// backoffLimit is the number of restarts the job survives.
func backoffLimit(policy v1beta1.RunPolicy) int32 {
	if policy.BackoffLimit != nil {
		return *policy.BackoffLimit
	}
	return v1beta1.DefaultBackoffLimit
}

// countInPlace adds to each group's inPlace the restarts of its live pods' containers since last
// counted, and forgets the pods that are gone. It may run any number of times: what it counted
// once it never counts again.
func countInPlace(replicas []*replica, status *v1beta1.JobStatus, container string) {
	adoptOlderCount(replicas, status, container)
	live := map[types.UID]bool{}
	for _, r := range replicas {
		if r.pod == nil {
			continue
		}
		live[r.pod.UID] = true
		now := inPlaceRestarts(r.pod, container)
		i := slices.IndexFunc(status.CountedInPlace, func(c v1beta1.PodRestarts) bool { return c.UID == r.pod.UID })
		switch {
		case i < 0 && now > 0:
			status.CountedInPlace = append(status.CountedInPlace, v1beta1.PodRestarts{UID: r.pod.UID, Restarts: now})
			replicaStatus(status, r.group.Type).InPlace += now
		case i >= 0 && now > status.CountedInPlace[i].Restarts:
			replicaStatus(status, r.group.Type).InPlace += now - status.CountedInPlace[i].Restarts
			status.CountedInPlace[i].Restarts = now
		}
	}
	status.CountedInPlace = slices.DeleteFunc(status.CountedInPlace, func(c v1beta1.PodRestarts) bool { return !live[c.UID] })
}

// adoptOlderCount reads the status an older operator wrote, which had no inPlace: its restarts
// (recreated plus the in-place restarts it saw) become inPlace, and the live pods' restarts as
// counted, once.
func adoptOlderCount(replicas []*replica, status *v1beta1.JobStatus, container string) {
	if len(status.CountedInPlace) > 0 {
		return
	}
	older := false
	for _, rs := range status.ReplicaStatuses {
		if rs.InPlace != 0 {
			return
		}
		older = older || rs.Restarts > rs.Recreated
	}
	if !older {
		return
	}
	for i := range status.ReplicaStatuses {
		rs := &status.ReplicaStatuses[i]
		rs.InPlace = max(rs.Restarts-rs.Recreated, 0)
	}
	for _, r := range replicas {
		if n := inPlaceRestarts(r.pod, container); n > 0 {
			status.CountedInPlace = append(status.CountedInPlace, v1beta1.PodRestarts{UID: r.pod.UID, Restarts: n})
		}
	}
}

// totalRestarts sets each group's restarts and the job's, and returns the job's: the groups'
// and the job's stalls (progress.go), each a restart of every replica counted once.
func totalRestarts(status *v1beta1.JobStatus) int32 {
	total := status.Stalls
	for i := range status.ReplicaStatuses {
		rs := &status.ReplicaStatuses[i]
		rs.Restarts = rs.Recreated + rs.InPlace
		total += rs.Restarts
	}
	status.Restarts = total
	return total
}

// countRestarts counts the restarts so far, and each new retryable failure once, by pod UID;
// it fails the job when the restarts are past backoffLimit, or a restart would take them there.
func (e *Reconciler) countRestarts(replicas []*replica, policy v1beta1.RunPolicy, status *v1beta1.JobStatus, now metav1.Time) []event {
	limit := backoffLimit(policy)
	countInPlace(replicas, status, e.Framework.Kind().Container)
	total := totalRestarts(status)
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
		status.CountedFailures = append(status.CountedFailures, r.pod.UID)
		replicaStatus(status, r.group.Type).Recreated++
		total = totalRestarts(status)
		msg := fmt.Sprintf("%s; recreating it (restart %d of backoffLimit %d)", why, total, limit)
		setCondition(status, v1beta1.JobRestarting, metav1.ConditionTrue, "RetryableFailure", msg, now)
		events = append(events, event{kind: corev1.EventTypeWarning, reason: "Restarting", action: "Restart", note: msg, related: r.pod})
	}
	return events
}

func inPlaceRestarts(pod *corev1.Pod, container string) int32 {
	if pod == nil {
		return 0
	}
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
