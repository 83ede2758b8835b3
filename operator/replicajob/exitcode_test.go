package replicajob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestExitCodeClass(t *testing.T) {
	for code, want := range map[int32]Outcome{
		0: Succeeded, 1: Permanent, 2: Permanent, 126: Permanent, 127: Permanent,
		128: Retryable, 130: Retryable, 137: Retryable, 143: Retryable, 255: Retryable,
	} {
		if got := ExitCodeClass(code); got != want {
			t.Errorf("exit %d: %v, want %v", code, got, want)
		}
	}
}

func terminated(phase corev1.PodPhase, code int32, reason string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	for _, c := range containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}},
		})
	}
	return pod
}

func TestJudge(t *testing.T) {
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	evicted := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}
	// The training container finished while a sidecar still runs.
	sidecar := terminated(corev1.PodRunning, 0, "Completed", "tensorflow")
	sidecar.Status.ContainerStatuses = append(sidecar.Status.ContainerStatuses, corev1.ContainerStatus{
		Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	})
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		policy v1beta1.RestartPolicy
		want   Outcome
		note   string
	}{
		{"running", running, v1beta1.RestartPolicyExitCode, Running, ""},
		{"pending", pending, v1beta1.RestartPolicyExitCode, Pending, ""},
		{"exit 0", terminated(corev1.PodSucceeded, 0, "Completed", "tensorflow"), v1beta1.RestartPolicyExitCode, Succeeded, ""},
		{"exit 1", terminated(corev1.PodFailed, 1, "Error", "tensorflow"), v1beta1.RestartPolicyExitCode, Permanent, "pod p exited with code 1 (Error; permanent: 1-127)"},
		{"exit 137", terminated(corev1.PodFailed, 137, "Error", "tensorflow"), v1beta1.RestartPolicyExitCode, Retryable, "pod p exited with code 137 (Error; retryable: 128-255)"},
		{"oom", terminated(corev1.PodFailed, 137, "OOMKilled", "tensorflow"), v1beta1.RestartPolicyExitCode, Permanent, "pod p exited with code 137 (OOMKilled; out of memory, permanent)"},
		{"never 137", terminated(corev1.PodFailed, 137, "Error", "tensorflow"), v1beta1.RestartPolicyNever, Permanent, "pod p exited with code 137 (Error; permanent: restartPolicy Never)"},
		{"evicted", evicted, v1beta1.RestartPolicyExitCode, Retryable, "pod p failed (Evicted; retryable)"},
		{"evicted never", evicted, v1beta1.RestartPolicyNever, Permanent, "pod p failed (Evicted; permanent: restartPolicy Never)"},
		{"sidecar still running", sidecar, v1beta1.RestartPolicyExitCode, Succeeded, ""},
		{"other container's exit", terminated(corev1.PodFailed, 1, "Error", "other"), v1beta1.RestartPolicyExitCode, Retryable, ""},
		{"onfailure transient exit", terminated(corev1.PodRunning, 1, "Error", "tensorflow"), v1beta1.RestartPolicyOnFailure, Running, ""},
		{"onfailure pod failed", terminated(corev1.PodFailed, 1, "Error", "tensorflow"), v1beta1.RestartPolicyOnFailure, Retryable, ""},
		{"always pod succeeded", terminated(corev1.PodSucceeded, 0, "Completed", "tensorflow"), v1beta1.RestartPolicyAlways, Succeeded, ""},
	} {
		v := Judge(tc.pod, "tensorflow", tc.policy)
		if v.Outcome != tc.want {
			t.Errorf("%s: outcome %v, want %v", tc.name, v.Outcome, tc.want)
		}
		if tc.note != "" && v.Describe("p") != tc.note {
			t.Errorf("%s: %q, want %q", tc.name, v.Describe("p"), tc.note)
		}
	}
}

func TestReplicaName(t *testing.T) {
	if got := ReplicaName("mnist", "WORKER", 3); got != "mnist-worker-3" {
		t.Errorf("got %s", got)
	}
}
