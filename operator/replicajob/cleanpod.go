package replicajob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// cleanUp deletes what cleanPodPolicy says should go once the job ended. It returns whether
// something it deletes is still there, which keeps the job in phase CleanUp.
//
// Running deletes the pods still running and keeps finished ones, so their logs stay readable;
// All deletes every pod; None deletes nothing. Services go with Running and All. A job that hit
// its deadline has its running pods stopped whatever the policy: that is what a deadline means.
func (e *Reconciler) cleanUp(ctx context.Context, job client.Object, status *v1beta1.JobStatus, policy v1beta1.RunPolicy, pods map[string]*corev1.Pod, services map[string]*corev1.Service) (bool, error) {
	clean := policy.CleanPodPolicy
	if clean == "" {
		clean = v1beta1.CleanPodPolicyRunning
	}
	if clean == v1beta1.CleanPodPolicyNone && failedBy(status, "DeadlineExceeded") {
		clean = v1beta1.CleanPodPolicyRunning
	}
	pending := false
	for _, pod := range pods {
		over := finishedPod(pod, e.Framework.Kind().Container)
		if clean == v1beta1.CleanPodPolicyNone || (clean == v1beta1.CleanPodPolicyRunning && over) {
			continue
		}
		pending = true
		if pod.DeletionTimestamp != nil {
			continue
		}
		err := e.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		log.FromContext(ctx).V(1).Info("clean-up: deleting pod", "pod", pod.Name, "phase", pod.Status.Phase, "policy", clean, "result", err)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return pending, fmt.Errorf("cleaning up pod %s: %w", pod.Name, err)
		}
	}
	if policy.CleanPodPolicy == v1beta1.CleanPodPolicyNone {
		return pending, nil
	}
	for _, svc := range services {
		pending = true
		if svc.DeletionTimestamp != nil {
			continue
		}
		if err := e.Client.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
			return pending, fmt.Errorf("cleaning up service %s: %w", svc.Name, err)
		}
	}
	return pending, nil
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
