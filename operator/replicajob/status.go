package replicajob

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// setCondition sets a condition, keeping its transition time when the status does not change.
func setCondition(status *v1beta1.JobStatus, typ string, s metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: now})
}

// replicaStatus returns the status entry of a replica type, adding it when missing.
func replicaStatus(status *v1beta1.JobStatus, typ string) *v1beta1.ReplicaStatus {
	for i := range status.ReplicaStatuses {
		if status.ReplicaStatuses[i].Type == typ {
			return &status.ReplicaStatuses[i]
		}
	}
	status.ReplicaStatuses = append(status.ReplicaStatuses, v1beta1.ReplicaStatus{Type: typ})
	return &status.ReplicaStatuses[len(status.ReplicaStatuses)-1]
}

// summarize recomputes the counts, phase and progress conditions from the replicas as observed.
//
// mounts says why pods that the pod status alone does not explain wait (mounts.go), by UID.
func summarize(container string, groups []Replica, replicas []*replica, status *v1beta1.JobStatus, cleaning bool, mounts map[types.UID]stuck, now metav1.Time) {
	// Keep only the entries of types the spec has, in spec order, with fresh counts; restarts
	// are restarts.go's.
	countInPlace(replicas, status, container)
	var fresh []v1beta1.ReplicaStatus
	for _, g := range groups {
		old := replicaStatus(status, g.Type)
		fresh = append(fresh, v1beta1.ReplicaStatus{Type: g.Type, Replicas: g.Replicas, Recreated: old.Recreated, InPlace: old.InPlace})
	}
	status.ReplicaStatuses = fresh

	present := map[types.UID]bool{}
	var waiting []string
	var stuckOnes stuckReplicas
	allCreated, allRunning := true, true
	for _, r := range replicas {
		rs := replicaStatus(status, r.group.Type)
		if r.pod == nil || !r.service {
			allCreated = false
		}
		if r.pod == nil {
			allRunning = false
			continue
		}
		present[r.pod.UID] = true
		counted := slices.Contains(status.CountedFailures, r.pod.UID)
		switch {
		case counted:
			allRunning = false
			waiting = append(waiting, r.name+" (restarting)")
		case r.verdict.Outcome == Pending:
			rs.Pending++
			allRunning = false
			waiting = append(waiting, r.name+" ("+waitingReason(r.pod)+")")
			why := whyStuck(r.pod)
			if why.Reason == "" {
				why = mounts[r.pod.UID]
			}
			if why.Reason != "" {
				stuckOnes.add(why, r.group.Type, r.index)
			}
		case r.verdict.Outcome == Running:
			rs.Active++
			if podReady(r.pod) {
				rs.Ready++
			}
		case r.verdict.Outcome == Succeeded:
			rs.Succeeded++
		default:
			rs.Failed++
		}
	}
	totalRestarts(status)
	var summary []string
	for _, rs := range status.ReplicaStatuses {
		summary = append(summary, fmt.Sprintf("%s %d/%d", strings.ToLower(rs.Type), rs.Ready, rs.Replicas))
	}
	status.Replicas = strings.Join(summary, " ")

	// A counted failure is forgotten once its pod is gone: its UID can never come back.
	status.CountedFailures = slices.DeleteFunc(status.CountedFailures, func(uid types.UID) bool { return !present[uid] })

	if allCreated && !meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobCreated) {
		setCondition(status, v1beta1.JobCreated, metav1.ConditionTrue, "ReplicasCreated",
			fmt.Sprintf("created %d pods and their addresses", len(replicas)), now)
	}

	if finished(status) {
		switch {
		case cleaning:
			status.Phase = v1beta1.JobPhaseCleanUp
		case status.State == v1beta1.JobStateSucceeded:
			status.Phase = v1beta1.JobPhaseDone
		default:
			status.Phase = v1beta1.JobPhaseFailed
		}
		return
	}
	status.State = v1beta1.JobStateRunning
	switch {
	case allRunning:
		status.Phase = v1beta1.JobPhaseRunning
		setCondition(status, v1beta1.JobRunning, metav1.ConditionTrue, "ReplicasRunning", "every replica is running or done", now)
		if meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobRestarting) {
			setCondition(status, v1beta1.JobRestarting, metav1.ConditionFalse, "ReplicasRunning", "every restarted replica is running again", now)
		}
	default:
		// Creating until every replica first ran; a restart later does not turn the clock back.
		if status.Phase != v1beta1.JobPhaseRunning {
			status.Phase = v1beta1.JobPhaseCreating
		}
		if reason, msg := stuckOnes.condition(); reason != "" {
			status.State = v1beta1.JobStateWaiting
			setCondition(status, v1beta1.JobRunning, metav1.ConditionFalse, reason, msg, now)
			return
		}
		msg := "waiting for " + strings.Join(waiting, ", ")
		if len(waiting) == 0 {
			msg = "waiting for replicas to be created"
		}
		setCondition(status, v1beta1.JobRunning, metav1.ConditionFalse, "ReplicasNotRunning", msg, now)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitingReason tells why a pod is not running yet, e.g. ErrImagePull, in the words of the kubelet.
func waitingReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return cs.State.Waiting.Reason
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason
		}
	}
	return string(pod.Status.Phase)
}
