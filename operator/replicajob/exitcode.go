package replicajob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Outcome is what a replica's pod says about the replica.
type Outcome int

const (
	Pending   Outcome = iota // created, not running yet
	Running                  // running
	Succeeded                // the training container exited 0: the replica is done
	Retryable                // failed in a way worth a new pod
	Permanent                // failed in a way that fails the job
)

// Verdict is an Outcome with the evidence a person needs to understand it.
type Verdict struct {
	Outcome  Outcome
	ExitCode int32  // of the training container, when it terminated
	Reason   string // e.g. OOMKilled, Error, Evicted
	HasExit  bool
}

// ExitCodeClass tells what an exit code of the training container means under the ExitCode
// policy: 0 success, 1-127 a permanent error in the program, 128-255 killed by a signal
// (128+n; e.g. 137 is SIGKILL from preemption), which is worth a retry.
func ExitCodeClass(code int32) Outcome {
	switch {
	case code == 0:
		return Succeeded
	case code >= 1 && code <= 127:
		return Permanent
	default:
		return Retryable
	}
}

// Judge classifies a replica pod under the replica's restart policy, looking at the training
// container first: a sidecar must not keep a finished replica alive, nor hide its exit code.
func Judge(pod *corev1.Pod, container string, policy v1beta1.RestartPolicy) Verdict {
	var term *corev1.ContainerStateTerminated
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == container {
			term = cs.State.Terminated
		}
	}
	v := Verdict{Reason: pod.Status.Reason}
	if term != nil {
		v.ExitCode, v.Reason, v.HasExit = term.ExitCode, term.Reason, true
	}

	switch policy {
	case v1beta1.RestartPolicyOnFailure, v1beta1.RestartPolicyAlways:
		// The kubelet restarts the container in place; only a pod that is over counts.
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			v.Outcome = Succeeded
		case corev1.PodFailed:
			v.Outcome = Retryable
		default:
			v.Outcome = runningOrPending(pod)
		}
		return v
	}

	switch {
	case term != nil && term.ExitCode == 0:
		v.Outcome = Succeeded
	case term != nil && policy == v1beta1.RestartPolicyNever:
		v.Outcome = Permanent
	case term != nil && term.Reason == "OOMKilled":
		// Exit 137 too, but a retry would run out of memory again.
		v.Outcome = Permanent
	case term != nil:
		v.Outcome = ExitCodeClass(term.ExitCode)
	case pod.Status.Phase == corev1.PodFailed && policy == v1beta1.RestartPolicyNever:
		v.Outcome = Permanent
	case pod.Status.Phase == corev1.PodFailed:
		// Failed without the training container terminating: evicted, node lost. Not the
		// program's fault, so worth a new pod.
		v.Outcome = Retryable
	case pod.Status.Phase == corev1.PodSucceeded:
		v.Outcome = Succeeded
	default:
		v.Outcome = runningOrPending(pod)
	}
	return v
}

func runningOrPending(pod *corev1.Pod) Outcome {
	if pod.Status.Phase == corev1.PodRunning {
		return Running
	}
	return Pending
}

// Class says how the exit was judged: "permanent: 1-127", "retryable: 128-255"...
func (v Verdict) Class() string {
	switch {
	case v.Reason == "OOMKilled":
		return "out of memory, permanent"
	case v.HasExit && v.Outcome == Permanent && v.ExitCode >= 1 && v.ExitCode <= 127:
		return "permanent: 1-127"
	case v.Outcome == Permanent:
		return "permanent: restartPolicy Never"
	case v.HasExit && v.Outcome == Retryable && v.ExitCode >= 128:
		return "retryable: 128-255"
	case v.Outcome == Retryable:
		return "retryable"
	}
	return ""
}

// Describe says in words why a pod ended, for events and conditions.
func (v Verdict) Describe(pod string) string {
	class := v.Class()
	reason := v.Reason
	if reason == "" {
		reason = "unknown reason"
	}
	if v.HasExit {
		return fmt.Sprintf("pod %s exited with code %d (%s; %s)", pod, v.ExitCode, reason, class)
	}
	return fmt.Sprintf("pod %s failed (%s; %s)", pod, reason, class)
}
