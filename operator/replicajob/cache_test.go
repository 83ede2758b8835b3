package replicajob_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The operator's cache holds the Deployments of jobs (TensorBoard) and no others: a cluster's
// own Deployments cost it no memory.
func TestCacheHoldsOnlyTheJobsDeployments(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "other"}
	other := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
		}},
	}
	must(t, k8s.Create(context.Background(), other))

	mgr := startManager(t, ns)

	job := standardJob(ns, "cached")
	job.Spec.Tensorboard = &v1beta1.TensorboardSpec{LogDir: "/logs"}
	must(t, k8s.Create(context.Background(), job))
	eventually(t, "the TensorBoard deployment in the cache", func() error {
		var list appsv1.DeploymentList
		if err := mgr.GetCache().List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var names []string
		for _, d := range list.Items {
			names = append(names, d.Name)
		}
		if len(names) != 1 || names[0] != "cached-tensorboard" {
			return errorf("cached deployments %v, want only cached-tensorboard", names)
		}
		return nil
	})
}

// A job applied with kubectl carries a second copy of itself in an annotation. The cache leaves
// it out, and the operator's status writes leave it on the stored job.
func TestCacheLeavesOutLastAppliedButKeepsItStored(t *testing.T) {
	ns := namespace(t)
	mgr := startManager(t, ns)

	job := standardJob(ns, "applied")
	job.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"kind":"TfJob"}`, "team": "vision"}
	must(t, k8s.Create(context.Background(), job))
	eventually(t, "the job Created, as the cache holds it", func() error {
		var cached v1beta1.TfJob
		if err := mgr.GetCache().Get(context.Background(), client.ObjectKeyFromObject(job), &cached); err != nil {
			return err
		}
		if condition(&cached, v1beta1.JobCreated) == nil {
			return errorf("not Created yet")
		}
		if _, ok := cached.Annotations[corev1.LastAppliedConfigAnnotation]; ok || cached.Annotations["team"] != "vision" {
			return errorf("cached annotations %v, want only team", cached.Annotations)
		}
		return nil
	})
	var stored v1beta1.TfJob
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &stored))
	if stored.Annotations[corev1.LastAppliedConfigAnnotation] != `{"kind":"TfJob"}` || stored.Annotations["team"] != "vision" {
		t.Fatalf("stored annotations after the operator's writes: %v", stored.Annotations)
	}
}

// startManager runs the operator on ns until the test ends and returns its manager, whose
// cache the tests look into.
func startManager(t *testing.T, ns string) manager.Manager {
	t.Helper()
	mgr, err := operator.New(cfg, operator.Options{Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0", ManyPerProcess: true})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return mgr
}
