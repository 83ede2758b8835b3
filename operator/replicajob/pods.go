package replicajob

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// ReplicaName is the name of replica (typ, index)'s pod and service: <job>-<type>-<index>.
// Deterministic names are what make creation idempotent: a repeated reconcile or a restarted
// operator gets AlreadyExists instead of a second pod.
func ReplicaName(job, typ string, index int) string {
	return fmt.Sprintf("%s-%s-%d", job, strings.ToLower(typ), index)
}

func ownerRef(kind string, job client.Object) metav1.OwnerReference {
	return *metav1.NewControllerRef(job, v1beta1.GroupVersion.WithKind(kind))
}

// podRestartPolicy maps a replica restart policy to the pod's. Under ExitCode the operator, not
// the kubelet, decides about restarts, so the pod itself never restarts.
func podRestartPolicy(p v1beta1.RestartPolicy) corev1.RestartPolicy {
	switch p {
	case v1beta1.RestartPolicyOnFailure:
		return corev1.RestartPolicyOnFailure
	case v1beta1.RestartPolicyAlways:
		return corev1.RestartPolicyAlways
	default:
		return corev1.RestartPolicyNever
	}
}

// QueueLabelPrefix marks the job labels of Kueue, which its pods get too.
const QueueLabelPrefix = "kueue.x-k8s.io/"

// newPod builds replica (r.Type, index)'s pod from the replica template.
func (e *Reconciler) newPod(job v1beta1.Job, cluster Cluster, r Replica, index int) *corev1.Pod {
	kind := e.Framework.Kind().Name
	tmpl := r.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ReplicaName(job.GetName(), r.Type, index),
			Namespace:       job.GetNamespace(),
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(kind, job)},
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	// A queue's labels on the job (Kueue's kueue.x-k8s.io/queue-name, ...) reach its pods, where
	// the queue and its admission checks look for them; the template's own win.
	for k, v := range job.GetLabels() {
		if _, set := pod.Labels[k]; !set && strings.HasPrefix(k, QueueLabelPrefix) {
			pod.Labels[k] = v
		}
	}
	for k, v := range e.Framework.Kind().ReplicaLabels(job.GetName(), r.Type, index) {
		pod.Labels[k] = v
	}
	pod.Spec.RestartPolicy = podRestartPolicy(r.RestartPolicy)
	if !cluster.ServicePerReplica {
		// Its address: <hostname>.<subdomain>.<namespace>.svc, through the job's service.
		pod.Spec.Hostname = pod.Name
		pod.Spec.Subdomain = JobServiceName(job.GetName())
	}

	env := e.Framework.Env(cluster, r.Type, index)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != e.Framework.Kind().Container {
			continue
		}
		c.Env = withFrameworkEnv(env, c.Env)
		// The kubelet keeps the tail of what a failed container printed as its termination
		// message, which the job's failure quotes (firstfailure.go); a template's own choice stands.
		if c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}
		if e.Progress != nil {
			e.Progress.Tell(e.Framework.Kind(), job.GetNamespace(), job.GetName(), pod, c)
		}
		if !hasPort(c, r.Port) {
			// Port names are unique in a pod: a user's own "replica-port" keeps its name.
			name := replicaPortName
			if hasPortNamed(pod, name) {
				name = ""
			}
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: r.Port, Protocol: corev1.ProtocolTCP})
		}
	}
	if e.Pods != nil {
		e.Pods.MutatePod(pod)
	}
	return pod
}

// withFrameworkEnv is the env of a training container whose template has own: the framework's
// first, so that the template's variables may refer to them ($(MASTER_ADDR) expands, as
// Kubernetes expands only variables defined earlier in the list), then the template's. A
// variable the template sets itself is the template's: the framework's is left out, and the job
// gets a Warning event naming it (overriddenEnv).
func withFrameworkEnv(framework, own []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(framework)+len(own))
	for _, v := range framework {
		if !slices.ContainsFunc(own, func(o corev1.EnvVar) bool { return o.Name == v.Name }) {
			out = append(out, v)
		}
	}
	return append(out, own...)
}

// overriddenEnv says, for the Warning event EnvOverridden, which of the framework's variables
// the templates of cluster's groups set themselves in the training container: "" when none.
func (e *Reconciler) overriddenEnv(cluster Cluster) string {
	var groups []string
	for _, g := range cluster.Groups {
		var names []string
		for _, c := range g.Template.Spec.Containers {
			if c.Name != e.Framework.Kind().Container {
				continue
			}
			for _, v := range e.Framework.Env(cluster, g.Type, 0) {
				if slices.ContainsFunc(c.Env, func(o corev1.EnvVar) bool { return o.Name == v.Name }) {
					names = append(names, v.Name)
				}
			}
		}
		if len(names) > 0 {
			groups = append(groups, fmt.Sprintf("%s sets %s", g.Type, strings.Join(names, ", ")))
		}
	}
	if len(groups) == 0 {
		return ""
	}
	return fmt.Sprintf("the template's own value replaces the operator's in container %s: %s",
		e.Framework.Kind().Container, strings.Join(groups, "; "))
}

// replicaPortName names the replica's port in its pod and its service.
const replicaPortName = "replica-port"

func hasPortNamed(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func hasPort(c *corev1.Container, port int32) bool {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return true
		}
	}
	return false
}

// Build returns the service and pods the engine creates for job, as they are sent to the
// apiserver, with no apiserver needed: for checks such as dry runs of what a job would create.
// The error is why the engine would fail the job instead (cluster.go).
func (e *Reconciler) Build(job v1beta1.Job) ([]client.Object, error) {
	cluster, err := Resolve(e.Framework, job)
	if err != nil {
		return nil, err
	}
	out := []client.Object{e.newJobService(job)}
	for _, g := range cluster.Groups {
		for i := 0; i < int(g.Replicas); i++ {
			out = append(out, e.newPod(job, cluster, g.Replica, i))
		}
	}
	return out, nil
}
