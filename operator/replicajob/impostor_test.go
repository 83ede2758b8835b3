package replicajob_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A tenant labels pods of its own like another job's replicas: a failed one, a running one and a
// succeeded one, claiming to be the victim's worker 1. The engine finds a job's pods through their
// controlling owner, never by labels alone: the victim's counts, restarts and outcome are its
// own pods', and its clean-up deletes none of the impostors.
func TestPodsLabelledAsAnotherJobsAreNotItsOwn(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(ctx, newJob(ns, "victim", replicaGroup(v1beta1.TfReplicaWorker, 2))))
	waitPods(t, ns, "victim-worker-0", "victim-worker-1")
	victim := getJob(t, ns, "victim")

	impostors := map[string]func(*corev1.Pod){
		"impostor-failed":  func(p *corev1.Pod) { kubelet{T: t, NS: ns}.Exit(p.Name, 1, "Error") },
		"impostor-running": func(p *corev1.Pod) { kubelet{T: t, NS: ns}.Running(p.Name) },
		// Owned by the victim, but not as its controller: an owner reference anyone may write.
		"impostor-owner": func(p *corev1.Pod) { kubelet{T: t, NS: ns}.Exit(p.Name, 137, "Error") },
	}
	for name, status := range impostors {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			v1beta1.LabelJobName: "victim", v1beta1.LabelJobKind: "tfjob", v1beta1.LabelReplicaType: "worker", v1beta1.LabelReplicaIndex: "1",
		}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}}}}
		if name == "impostor-owner" {
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1beta1.GroupVersion.String(), Kind: "TfJob", Name: "victim", UID: victim.UID}}
		}
		must(t, k8s.Create(ctx, pod))
		status(pod)
	}

	kl := kubelet{T: t, NS: ns}
	kl.Running("victim-worker-0", "victim-worker-1")
	waitJob(t, ns, "victim", "running on its own pods", func(j *v1beta1.TfJob) error {
		rs := replicaStatus(j, "WORKER")
		if j.Status.Phase != v1beta1.JobPhaseRunning || rs.Active != 2 || rs.Failed != 0 || j.Status.Restarts != 0 {
			return errorf("phase %s, workers %+v, restarts %d", j.Status.Phase, rs, j.Status.Restarts)
		}
		return nil
	})
	kl.Exit("victim-worker-0", 0, "Completed")
	job := waitJob(t, ns, "victim", "succeeded", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	if job.Status.Restarts != 0 {
		t.Errorf("restarts %d: an impostor's exit was counted", job.Status.Restarts)
	}
	for name := range impostors {
		var pod corev1.Pod
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil || pod.DeletionTimestamp != nil {
			t.Errorf("impostor %s deleted or being deleted by the victim's clean-up (err %v)", name, err)
		}
	}
}
