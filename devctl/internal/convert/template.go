package convert

import (
	corev1 "k8s.io/api/core/v1"
)

// podTemplate reads a replica group's pod template. Fields today's Kubernetes no longer has are
// dropped with a warning, and the GPU resource of 2017 gets its current name.
func podTemplate(path string, v any, w *warnings) (corev1.PodTemplateSpec, error) {
	var t corev1.PodTemplateSpec
	if _, err := object(path, v); err != nil {
		return t, err
	}
	dropped, err := decode(path, v, &t)
	if err != nil {
		return t, err
	}
	w.dropped(dropped, "pods in today's Kubernetes have no such fields")
	renameGPUResource(path, &t, w)
	return t, nil
}

// takeRestartPolicy clears the pod's restartPolicy and returns what it was. In mlkube the
// replica's restartPolicy says what happens when the tensorflow container exits, and the
// operator sets every pod's restartPolicy from it, so one in the template would be overwritten.
func takeRestartPolicy(t *corev1.PodTemplateSpec) corev1.RestartPolicy {
	p := t.Spec.RestartPolicy
	t.Spec.RestartPolicy = ""
	return p
}

// oldGPUResource is how Kubernetes 1.6 to 1.10 named an NVIDIA GPU; 1.11 removed it in favour
// of the device plugin's nvidia.com/gpu, the resource mlkube's accelerator config acts on.
const (
	oldGPUResource corev1.ResourceName = "alpha.kubernetes.io/nvidia-gpu"
	gpuResource    corev1.ResourceName = "nvidia.com/gpu"
)

func renameGPUResource(path string, t *corev1.PodTemplateSpec, w *warnings) {
	renamed := false
	rename := func(list corev1.ResourceList) {
		q, ok := list[oldGPUResource]
		if !ok {
			return
		}
		delete(list, oldGPUResource)
		if _, set := list[gpuResource]; !set {
			list[gpuResource] = q
		}
		renamed = true
	}
	for _, cs := range [][]corev1.Container{t.Spec.InitContainers, t.Spec.Containers} {
		for i := range cs {
			rename(cs[i].Resources.Limits)
			rename(cs[i].Resources.Requests)
		}
	}
	if renamed {
		w.add("%s: renamed the GPU resource %s to %s, its name since Kubernetes 1.11 (the old name no longer schedules anywhere)",
			path, oldGPUResource, gpuResource)
	}
}
