package replicajob

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/eventtime"
)

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list

// A volume the kubelet cannot mount (a ConfigMap, Secret or claim that does not exist, a typo in
// its name) leaves a pod creating its containers for ever, and the kubelet says why only in
// FailedMount events, never in the pod's status (waitingReason: ContainerCreating). So once a
// job's pod has been creating its containers for mountGrace, the engine reads the FailedMount
// events of the job's namespace, one list for the whole job, and again every mountRecheck
// while a pod still creates; what they say joins the other reasons a job waits (waiting.go).
const (
	mountGrace   = 20 * time.Second
	mountRecheck = 30 * time.Second
)

// mountChecks is what the engine last read of a job's FailedMount events.
type mountChecks struct {
	at  time.Time
	why map[types.UID]stuck
}

// mountFailures says why each of replicas' pods that has created its containers for longer than
// mountGrace cannot mount a volume, by pod UID, and how soon to look again; nil and 0 when no pod
// has been creating that long.
func (e *Reconciler) mountFailures(ctx context.Context, ns string, mem *memory, replicas []*replica, now time.Time) (map[types.UID]stuck, time.Duration, error) {
	creating, ours := map[types.UID]bool{}, map[types.UID]bool{}
	var next time.Duration
	for _, r := range replicas {
		if r.pod == nil || r.verdict.Outcome != Pending {
			continue
		}
		ours[r.pod.UID] = true
		since, ok := creatingSince(r.pod)
		if !ok {
			continue
		}
		if left := mountGrace - now.Sub(since); left > 0 {
			next = soonest(next, left)
			continue
		}
		creating[r.pod.UID] = true
	}
	if len(creating) == 0 {
		return nil, next, nil
	}
	if now.Sub(mem.mounts.at) >= mountRecheck {
		var list eventsv1.EventList
		if err := e.reader().List(ctx, &list, ctrl.InNamespace(ns), ctrl.MatchingFields{"reason": "FailedMount"}); err != nil {
			return nil, 0, err
		}
		mem.mounts = mountChecks{at: now, why: map[types.UID]stuck{}}
		latest := map[types.UID]time.Time{}
		for i := range list.Items {
			ev := &list.Items[i]
			uid := ev.Regarding.UID
			at, _ := eventtime.Last(ev)
			if !ours[uid] || at.Before(latest[uid]) {
				continue // another job's pod, or older than one already read
			}
			latest[uid] = at
			mem.mounts.why[uid] = stuck{Reason: "FailedMount", Message: ev.Note}
		}
	}
	why := map[types.UID]stuck{}
	for uid := range creating {
		if s, ok := mem.mounts.why[uid]; ok {
			why[uid] = s
		}
	}
	// The events were read at most mountRecheck ago (just now, when they were due).
	return why, soonest(next, mountRecheck-now.Sub(mem.mounts.at)), nil
}

// creatingSince is when a pod that is creating its containers was scheduled; ok is false for a
// pod that is doing anything else.
func creatingSince(pod *corev1.Pod) (time.Time, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w == nil || w.Reason != "ContainerCreating" {
			return time.Time{}, false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, len(pod.Status.ContainerStatuses) > 0
		}
	}
	return time.Time{}, false
}
