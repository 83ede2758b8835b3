package jobtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kubelet plays the kubelet's part for the pods of one namespace: it writes the statuses a
// real one would.
type Kubelet struct {
	T  *testing.T
	NS string
}

// Update changes a pod's status.
func (k Kubelet) Update(name string, mutate func(*corev1.Pod)) {
	k.T.Helper()
	err := Retry(func() error {
		var pod corev1.Pod
		if err := Client.Get(context.Background(), types.NamespacedName{Namespace: k.NS, Name: name}, &pod); err != nil {
			return err
		}
		mutate(&pod)
		return Client.Status().Update(context.Background(), &pod)
	})
	Must(k.T, err)
}

// ContainerStatus gives every container of pod the state.
func ContainerStatus(pod *corev1.Pod, state corev1.ContainerState, restarts int32) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		out = append(out, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "docker://sha256:0", State: state,
			Ready: state.Running != nil, RestartCount: restarts, ContainerID: "containerd://" + pod.Name,
		})
	}
	return out
}

// Running marks pods running and ready.
func (k Kubelet) Running(names ...string) {
	k.T.Helper()
	for _, name := range names {
		k.Update(name, func(p *corev1.Pod) {
			now := metav1.Now()
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
			p.Status.ContainerStatuses = ContainerStatus(p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, 0)
		})
	}
}

// Exit ends a pod whose restartPolicy is Never: its containers terminated with code and reason.
func (k Kubelet) Exit(name string, code int32, reason string) {
	k.T.Helper()
	k.Update(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodFailed
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
		p.Status.ContainerStatuses = ContainerStatus(p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now,
		}}, 0)
	})
}

// Terminated reports the containers' exit while the pod is still Running, as the kubelet does
// for a few seconds before it moves the pod to a terminal phase.
func (k Kubelet) Terminated(name string, code int32, reason string) {
	k.T.Helper()
	k.Update(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = ContainerStatus(p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now,
		}}, 0)
	})
}

// RestartedInPlace reports a running container the kubelet restarted n times (OnFailure).
func (k Kubelet) RestartedInPlace(name string, n int32) {
	k.T.Helper()
	k.Update(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = ContainerStatus(p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, n)
	})
}
