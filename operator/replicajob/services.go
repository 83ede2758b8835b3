package replicajob

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job has one headless Service, named as the job. It selects the job's pods, and each
// replica pod names it as its subdomain, with its own name as hostname: cluster DNS then answers
// <job>-<type>-<index>.<job>.<namespace>.svc with that pod's address. One Service and one
// EndpointSlice a job, where a service per replica made as many of each as replicas: fewer
// writes to the apiserver and fewer objects for every kube-proxy and DNS server to watch.
//
// A job an older operator started with a service per replica keeps that layout until it ends:
// its running replicas were told those addresses (cluster.go).

// JobServiceName is the name of job's headless service: the job's own. The CRD keeps job names
// to 48 characters, so the service name and every replica's hostname, <job>-<type>-<index>, are
// DNS labels.
func JobServiceName(job string) string { return job }

// newJobService builds the job's headless service.
func (e *Reconciler) newJobService(job client.Object) *corev1.Service {
	selector := map[string]string{
		v1beta1.LabelJobName: job.GetName(),
		v1beta1.LabelJobKind: e.Framework.Kind().Label(),
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobServiceName(job.GetName()),
			Namespace:       job.GetNamespace(),
			Labels:          selector,
			OwnerReferences: []metav1.OwnerReference{ownerRef(e.Framework.Kind().Name, job)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selector,
			// Replicas dial each other while starting up, before any is ready.
			PublishNotReadyAddresses: true,
		},
	}
}

// newService builds the headless service of replica (r.Type, index) in the older layout.
func (e *Reconciler) newService(job client.Object, r Replica, index int) *corev1.Service {
	labels := e.Framework.Kind().ReplicaLabels(job.GetName(), r.Type, index)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ReplicaName(job.GetName(), r.Type, index),
			Namespace:       job.GetNamespace(),
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(e.Framework.Kind().Name, job)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 labels,
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{
				Name: replicaPortName, Port: r.Port, TargetPort: intstr.FromInt32(r.Port), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// replicaObject says whether obj, owned by job, is the engine's (a replica's pod or service,
// the job's service) rather than a framework's extra.
func replicaObject(obj client.Object, job client.Object) bool {
	if _, replica := obj.GetLabels()[v1beta1.LabelReplicaType]; replica {
		return true
	}
	_, service := obj.(*corev1.Service)
	return service && obj.GetName() == JobServiceName(job.GetName())
}
