package replicajob

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// cleanUp is what cleanPodPolicy says should go once the job ended, and whether anything it
// names is still there (being deleted or not), which keeps the job in phase CleanUp.
//
// Running deletes the pods still running and keeps finished ones, so their logs stay readable;
// All deletes every pod; None deletes nothing. Services go with Running and All. A job that hit
// its deadline has its running pods stopped whatever the policy: that is what a deadline means.
func (e *Reconciler) cleanUp(status *v1beta1.JobStatus, policy v1beta1.RunPolicy, pods map[string]*corev1.Pod, services map[string]*corev1.Service) (deletions, bool) {
	clean := policy.CleanPodPolicy
	if clean == "" {
		clean = v1beta1.CleanPodPolicyRunning
	}
	if clean == v1beta1.CleanPodPolicyNone && failedBy(status, "DeadlineExceeded") {
		clean = v1beta1.CleanPodPolicyRunning
	}
	d := deletions{why: "cleaning up (cleanPodPolicy " + string(clean) + ")"}
	pending := false
	doom := func(obj ctrl.Object) {
		pending = true
		if obj.GetDeletionTimestamp() == nil {
			d.objs = append(d.objs, obj)
		}
	}
	for _, pod := range pods {
		over := finishedPod(pod, e.Framework.Kind().Container)
		if clean == v1beta1.CleanPodPolicyNone || (clean == v1beta1.CleanPodPolicyRunning && over) {
			continue
		}
		doom(pod)
	}
	if policy.CleanPodPolicy == v1beta1.CleanPodPolicyNone {
		return d, pending
	}
	for _, svc := range services {
		doom(svc)
	}
	return d, pending
}

func failedBy(status *v1beta1.JobStatus, reason string) bool {
	for _, c := range status.Conditions {
		if c.Type == v1beta1.JobFailed && c.Reason == reason {
			return true
		}
	}
	return false
}

// finishedPod is true once the pod is over or its training container has terminated. The
// kubelet reports a container's exit some seconds before it moves the pod to a terminal phase;
// a replica that just finished must not be taken for a running one and deleted with its logs.
func finishedPod(pod *corev1.Pod, container string) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return true
		}
	}
	return false
}
