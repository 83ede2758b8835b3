package jobwatch

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Container is the name of the container that decides a pod's replica, whose state is the
// replica's and whose log is its log: the kind's training container, the kind told by the pod's
// mlkube.io/job-kind label. A pod without that container, or without the label (made by hand, or
// by an older operator), is taken to be of the first kind of the table whose container it has;
// else its first container decides.
func Container(pod *corev1.Pod) string {
	has := func(name string) bool {
		return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	}
	if k := v1beta1.KindNamed(pod.Labels[v1beta1.LabelJobKind]); k != nil && has(k.Container) {
		return k.Container
	}
	for _, k := range v1beta1.Kinds {
		if has(k.Container) {
			return k.Container
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}

// ContainerStatus is the status of the pod's Container; the first container's while the kubelet
// reports none of that name; nil before it reports any.
func ContainerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	name := Container(pod)
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	if len(pod.Status.ContainerStatuses) > 0 {
		return &pod.Status.ContainerStatuses[0]
	}
	return nil
}
