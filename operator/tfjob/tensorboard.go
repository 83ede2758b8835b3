package tfjob

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;delete

// TensorBoard listens on this port in its pod; the Service maps port 80 to it.
const tensorboardPort = 6006

// tensorboardHint is what to do when the apiserver finds a TensorBoard object invalid.
const tensorboardHint = "fix spec.tensorboard, or remove it and add it again"

// DefaultTensorboardImage runs TensorBoard when spec.tensorboard.image is unset.
const DefaultTensorboardImage = "tensorflow/tensorflow:2.16.1"

// ExtraTypes: a TfJob with spec.tensorboard has a Deployment and a Service besides its replicas.
func (Framework) ExtraTypes() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &corev1.Service{}}
}

// Extras are TensorBoard's Deployment and Service, for a job that asks for one. The engine
// creates them, keeps them after the job ended (the results are worth a look), and deletes them
// when spec.tensorboard is removed.
func (Framework) Extras(job v1beta1.Job) []client.Object {
	tf := job.(*v1beta1.TfJob)
	if tf.Spec.Tensorboard == nil {
		return nil
	}
	dep, svc := TensorboardObjects(tf)
	return []client.Object{dep, svc}
}

// ExtrasHint is what to do when the apiserver finds a TensorBoard object invalid.
func (Framework) ExtrasHint() string { return tensorboardHint }

// ExtrasStatus is status.tensorboard: where TensorBoard is served, and whether it is ready.
func (Framework) ExtrasStatus(job v1beta1.Job, shown map[string]client.Object, status *v1beta1.JobStatus) {
	tf := job.(*v1beta1.TfJob)
	if tf.Spec.Tensorboard == nil {
		status.Tensorboard = nil
		return
	}
	name := tf.Name + "-tensorboard"
	ready := false
	if dep, ok := shown["deployment/"+name].(*appsv1.Deployment); ok {
		ready = dep.Status.AvailableReplicas > 0
	}
	status.Tensorboard = &v1beta1.TensorboardStatus{
		ServiceName: name,
		URL:         fmt.Sprintf("http://%s.%s.svc", name, tf.Namespace),
		ProxyPath:   fmt.Sprintf("/api/v1/namespaces/%s/services/%s:80/proxy/", tf.Namespace, name),
		Ready:       ready,
	}
}

// TensorboardObjects are the Deployment and Service that run a TensorBoard for job, which must
// have spec.tensorboard. The engine makes them the job's (owner, labels) when it creates them.
func TensorboardObjects(job *v1beta1.TfJob) (*appsv1.Deployment, *corev1.Service) {
	tb, name := job.Spec.Tensorboard, job.Name+"-tensorboard"
	// What selects TensorBoard's pod; each object gets its own copy, as the engine adds labels.
	labels := map[string]string{v1beta1.LabelJobName: job.Name, v1beta1.LabelJobKind: v1beta1.KindOf(job).Label(), v1beta1.LabelTensorboard: "true"}
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
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: maps.Clone(labels)},
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
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: maps.Clone(labels)},
		Spec: corev1.ServiceSpec{
			Type:     serviceType,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(tensorboardPort)}},
		},
	}
	return dep, svc
}
