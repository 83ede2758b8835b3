package replicajob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Each reason a pod gives for not running, from its status alone: what needs its user is
// stuck, with a reason a program can match and words that stay the same across retries; what
// is on its way is not.
func TestWhyStuck(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "tensorflow", Image: "example.com/trainer:v1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}}}}
	}
	pull := "failed to pull and unpack image \"example.com/trainer:v1\": dial tcp: lookup example.com: no such host"
	unschedulable := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
	}}}}
	initStuck := waiting("", "")
	initStuck.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", Image: "busybox", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "data" not found`}}}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want stuck
	}{
		{"pull failed", waiting("ErrImagePull", pull), stuck{"ImagePullBackOff", "cannot pull example.com/trainer:v1: " + pull}},
		{"pull backing off", waiting("ImagePullBackOff", `Back-off pulling image "example.com/trainer:v1": ErrImagePull: `+pull),
			stuck{"ImagePullBackOff", "cannot pull example.com/trainer:v1: " + pull}},
		{"registry unavailable", waiting("RegistryUnavailable", pull), stuck{"ImagePullBackOff", "cannot pull example.com/trainer:v1: " + pull}},
		{"pull with no words", waiting("ImagePullBackOff", `Back-off pulling image "example.com/trainer:v1"`), stuck{"ImagePullBackOff", "cannot pull example.com/trainer:v1"}},
		{"never pulled", waiting("ErrImageNeverPull", `Container image "example.com/trainer:v1" is not present with pull policy of Never`),
			stuck{"ErrImageNeverPull", `Container image "example.com/trainer:v1" is not present with pull policy of Never`}},
		{"config", waiting("CreateContainerConfigError", `secret "token" not found`), stuck{"CreateContainerConfigError", `secret "token" not found`}},
		{"crash loop", waiting("CrashLoopBackOff", "back-off 40s restarting failed container=tensorflow pod=x"),
			stuck{"CrashLoopBackOff", "back-off restarting failed container=tensorflow pod=x"}},
		{"init container", initStuck, stuck{"CreateContainerConfigError", `secret "data" not found`}},
		{"unschedulable", unschedulable, stuck{"Unschedulable", "cannot be scheduled: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}},
		{"creating", waiting("ContainerCreating", ""), stuck{}},
		{"initializing", waiting("PodInitializing", ""), stuck{}},
		{"just created", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, stuck{}},
	} {
		if got := whyStuck(tc.pod); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestRanges(t *testing.T) {
	refs := []replicaRef{{"WORKER", 0}, {"WORKER", 1}, {"WORKER", 2}, {"WORKER", 3}, {"PS", 0}, {"PS", 1}, {"EVALUATOR", 0}, {"EVALUATOR", 2}}
	if got, want := ranges(refs), "worker-0..3, ps-0..1, evaluator-0, evaluator-2"; got != want {
		t.Errorf("ranges = %q, want %q", got, want)
	}
}
