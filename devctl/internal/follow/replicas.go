package follow

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// ReplicaOf names the replica a pod plays (v1beta1.ReplicaOf): "worker-1"; "" for a pod that
// is no replica (TensorBoard's).
func ReplicaOf(pod *corev1.Pod) string {
	typ, index, ok := v1beta1.ReplicaOf(pod.Labels)
	if !ok {
		return ""
	}
	return typ + "-" + strconv.Itoa(index)
}

// Replica states, as the output shows them. They describe the job's container (tensorflow,
// mxnet), which decides the replica's outcome, more than the pod.
const (
	Pending     = "Pending"
	Running     = "Running"
	Succeeded   = "Succeeded"
	Failed      = "Failed"
	Terminating = "Terminating"
	Deleted     = "Deleted"
)

// State is what a replica's pod is doing, with what explains it: the exit code of a finished
// container, the reason a pending one waits.
type State struct {
	Phase string
	// Detail is "exit code 137, Error" for a finished container, the waiting reason of a
	// pending one ("ErrImagePull: ..."), else empty.
	Detail string
	// Restarts is the job container's restartCount: in-place restarts (OnFailure, Always).
	Restarts int32
	// LastExit describes the last in-place restart's exit: "exit code 137, Error".
	LastExit string
}

// String is "Failed (exit code 1, Error)", or the phase alone.
func (s State) String() string {
	if s.Detail == "" {
		return s.Phase
	}
	return s.Phase + " (" + s.Detail + ")"
}

// started says whether the replica's program has run (or is running).
func (s State) started() bool {
	switch s.Phase {
	case Running, Succeeded:
		return true
	case Failed, Terminating:
		return strings.HasPrefix(s.Detail, "exit code")
	}
	return false
}

// quietWaits are the waiting reasons of every normal start; others (CrashLoopBackOff, ...) are
// worth a line.
var quietWaits = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true}

// The waits the operator says once for the whole job in its Running condition ("worker-0..3,
// ps-0..1: cannot pull ...", v1beta1.ImagePullReasons) get no replica line: one for each replica
// at each of the kubelet's retries (ErrImagePull, ImagePullBackOff, ...) would say the same
// many times.

func exitDetail(t *corev1.ContainerStateTerminated) string {
	d := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Reason != "" && !(t.ExitCode == 0 && t.Reason == "Completed") {
		d += ", " + t.Reason
	}
	return d
}

// PodState reads a replica's State from its pod.
func PodState(pod *corev1.Pod) State {
	cs := jobwatch.ContainerStatus(pod)
	var s State
	if cs != nil {
		s.Restarts = cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil {
			s.LastExit = exitDetail(t)
		}
	}
	switch {
	case cs != nil && cs.State.Terminated != nil:
		s.Phase, s.Detail = Failed, exitDetail(cs.State.Terminated)
		if cs.State.Terminated.ExitCode == 0 {
			s.Phase = Succeeded
		}
	case pod.DeletionTimestamp != nil:
		s.Phase = Terminating
	case cs != nil && cs.State.Running != nil:
		s.Phase = Running
	case pod.Status.Phase == corev1.PodSucceeded:
		s.Phase = Succeeded
	case pod.Status.Phase == corev1.PodFailed:
		s.Phase, s.Detail = Failed, joinNonEmpty(": ", pod.Status.Reason, pod.Status.Message)
	default:
		s.Phase = Pending
		if w := waitingOf(cs); w != nil && !quietWaits[w.Reason] && !v1beta1.ImagePullReasons[w.Reason] {
			// The reason alone: its words are the job's Running condition's, said once, and a
			// back-off's count-down would make a line of every retry.
			s.Detail = w.Reason
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" && c.Reason != corev1.PodReasonUnschedulable && s.Detail == "" {
				s.Detail = joinNonEmpty(": ", c.Reason, c.Message)
			}
		}
	}
	return s
}

func waitingOf(cs *corev1.ContainerStatus) *corev1.ContainerStateWaiting {
	if cs == nil {
		return nil
	}
	return cs.State.Waiting
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// replicaTracker remembers what was said about each replica, so that only changes are printed.
type replicaTracker struct {
	pods    map[string]*corev1.Pod // by replica, the newest pod seen
	states  map[string]State
	started map[string]bool
}

func newReplicaTracker() *replicaTracker {
	return &replicaTracker{pods: map[string]*corev1.Pod{}, states: map[string]State{}, started: map[string]bool{}}
}

// observe takes a replica's pod, or the pod just deleted, and returns what changed, in words:
// "Pending -> Running", "Deleted -> Pending (new pod)", "restarted in place after exit code 137,
// Error (restart 1)".
func (r *replicaTracker) observe(replica string, pod *corev1.Pod, deleted bool) []string {
	prevPod, seen := r.pods[replica]
	prev := r.states[replica]
	if seen && prevPod.UID != pod.UID && pod.CreationTimestamp.Before(&prevPod.CreationTimestamp) {
		return nil // an older pod's late news: its replacement is already here
	}
	if deleted {
		if !seen || prevPod.UID != pod.UID || prev.Phase == Deleted {
			return nil
		}
		r.states[replica] = State{Phase: Deleted}
		return []string{prev.Phase + " -> " + Deleted}
	}
	r.pods[replica] = pod
	cur := PodState(pod)
	r.states[replica] = cur
	if cur.started() {
		r.started[replica] = true
	}
	var lines []string
	switch {
	case !seen:
		lines = append(lines, cur.String())
	case prevPod.UID != pod.UID:
		lines = append(lines, prev.Phase+" -> "+cur.Phase+withDetail(cur.Detail, "new pod"))
	default:
		if cur.Restarts > prev.Restarts {
			lines = append(lines, fmt.Sprintf("restarted in place after %s (restart %d)", orWord(cur.LastExit, "an exit"), cur.Restarts))
		}
		if cur.Phase != prev.Phase {
			lines = append(lines, prev.Phase+" -> "+cur.String())
		} else if cur.Detail != prev.Detail && cur.Detail != "" {
			lines = append(lines, cur.String())
		}
	}
	return lines
}

// allStarted says whether every replica of names has started.
func (r *replicaTracker) allStarted(names []string) bool {
	for _, n := range names {
		if !r.started[n] {
			return false
		}
	}
	return len(names) > 0
}

func withDetail(detail, extra string) string {
	return " (" + joinNonEmpty(", ", extra, detail) + ")"
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}
