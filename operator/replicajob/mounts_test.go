package replicajob_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A replica whose volume cannot be mounted creates its containers for ever, and only the
// kubelet's FailedMount events say why: once the pod has been at it a while, the job waits
// with reason FailedMount and the kubelet's words, like any other reason.
func TestWaitingOnAVolume(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(ctx, newJob(ns, "mount", replicaGroup(v1beta1.TfReplicaWorker, 2))))
	waitPods(t, ns, "mount-worker-0", "mount-worker-1")
	note := `MountVolume.SetUp failed for volume "data" : configmap "training-data" not found`
	var pod corev1.Pod
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "mount-worker-1"}, &pod))
	// As the kubelet reports it (through the core events API, which events.k8s.io also serves),
	// before the pods' statuses say they create their containers: a wait the engine checks at once.
	must(t, k8s.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "mount-worker-1.failedmount"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		Reason:         "FailedMount", Message: note, Type: corev1.EventTypeWarning,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 3,
		Source: corev1.EventSource{Component: "kubelet"},
	}))
	scheduled := metav1.NewTime(time.Now().Add(-time.Minute)) // long enough ago to look at events
	kl := kubelet{T: t, NS: ns}
	for _, n := range []string{"mount-worker-0", "mount-worker-1"} {
		kl.Update(n, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled}}
			p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, 0)
		})
	}
	waitJob(t, ns, "mount", "waiting on the volume", func(j *v1beta1.TfJob) error {
		c := condition(j, v1beta1.JobRunning)
		if j.Status.State != v1beta1.JobStateWaiting || c == nil || c.Reason != "FailedMount" || c.Message != "worker-1: "+note {
			return errorf("state %s, Running condition %+v", j.Status.State, c)
		}
		return nil
	})
}
