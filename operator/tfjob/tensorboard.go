package tfjob

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;delete

// TensorBoard listens on this port in its pod; the Service maps port 80 to it.
const tensorboardPort = 6006

// tensorboardHint is what to do when the apiserver finds a TensorBoard object invalid.
const tensorboardHint = "fix spec.tensorboard, or remove it and add it again"

// DefaultTensorboardImage runs TensorBoard when spec.tensorboard.image is unset.
const DefaultTensorboardImage = "tensorflow/tensorflow:2.16.1"

// ExtraOwnedTypes: a TfJob with spec.tensorboard owns a Deployment (and a Service, which the
// engine watches already).
func (Framework) ExtraOwnedTypes() []client.Object {
	return []client.Object{&appsv1.Deployment{}}
}

// ReconcileExtras runs TensorBoard for jobs that ask for it. It stays after the job ended, so
// the results can still be looked at, and goes with the job.
func (Framework) ReconcileExtras(ctx context.Context, c client.Client, obj client.Object, status *v1beta1.JobStatus) error {
	job := obj.(*v1beta1.TfJob)
	tb := job.Spec.Tensorboard
	name := job.Name + "-tensorboard"
	if tb == nil {
		status.Tensorboard = nil
		return removeTensorboard(ctx, c, job, name)
	}
	dep, svc := TensorboardObjects(job)

	var have appsv1.Deployment
	err := c.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, dep); err != nil {
			return replicajob.CreateFailed(dep, tensorboardHint, err)
		}
	case err != nil:
		return err
	}
	var haveSvc corev1.Service
	err = c.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, &haveSvc)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, svc); err != nil {
			return replicajob.CreateFailed(svc, tensorboardHint, err)
		}
	case err != nil:
		return err
	}

	status.Tensorboard = &v1beta1.TensorboardStatus{
		ServiceName: name,
		URL:         fmt.Sprintf("http://%s.%s.svc", name, job.Namespace),
		ProxyPath:   fmt.Sprintf("/api/v1/namespaces/%s/services/%s:80/proxy/", job.Namespace, name),
		Ready:       have.Status.AvailableReplicas > 0,
	}
	return nil
}

// TensorboardObjects are the Deployment and Service that run a TensorBoard for job, which must
// have spec.tensorboard.
func TensorboardObjects(job *v1beta1.TfJob) (*appsv1.Deployment, *corev1.Service) {
	tb, name := job.Spec.Tensorboard, job.Name+"-tensorboard"
	labels := map[string]string{replicajob.LabelJobName: job.Name, replicajob.LabelJobKind: "tfjob", "mlkube.io/tensorboard": "true"}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(job, v1beta1.GroupVersion.WithKind("TfJob"))}
	image := tb.Image
	if image == "" {
		image = DefaultTensorboardImage
	}
	serviceType := tb.ServiceType
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}
	// The user's labels first, ours over them: the Deployment's selector must keep matching.
	podLabels := maps.Clone(tb.PodLabels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, labels)
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: labels, OwnerReferences: owner},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(tb.PodAnnotations)},
				Spec: corev1.PodSpec{
					Volumes: tb.Volumes,
					Containers: []corev1.Container{{
						Name:         "tensorboard",
						Image:        image,
						Command:      []string{"tensorboard", "--logdir", tb.LogDir, "--host", "0.0.0.0", "--port", fmt.Sprint(tensorboardPort)},
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: tensorboardPort}},
						VolumeMounts: tb.VolumeMounts,
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: labels, OwnerReferences: owner},
		Spec: corev1.ServiceSpec{
			Type:     serviceType,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(tensorboardPort)}},
		},
	}
	return dep, svc
}

// removeTensorboard deletes the TensorBoard of a job whose spec no longer asks for one.
func removeTensorboard(ctx context.Context, c client.Client, job *v1beta1.TfJob, name string) error {
	key := types.NamespacedName{Namespace: job.Namespace, Name: name}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		err := c.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != job.UID {
			continue
		}
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing TensorBoard %s: %w", name, err)
		}
	}
	return nil
}
