package follow

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A Group is one replica group of a job: its type as the output names it (master, scheduler)
// and how many replicas it has.
type Group struct {
	Type     string
	Replicas int32
}

// KindOf is the kind of a job; nil for an object that is no job.
func KindOf(job client.Object) *v1beta1.Kind { return v1beta1.KindOf(job) }

// StatusOf is the job's status.
func StatusOf(job client.Object) *v1beta1.JobStatus { return job.(v1beta1.Job).JobStatus() }

// GroupsOf lists the job's replica groups in spec order, types in lower case.
func GroupsOf(job client.Object) []Group {
	var out []Group
	for _, g := range job.(v1beta1.Job).Groups() {
		out = append(out, Group{Type: strings.ToLower(g.Type), Replicas: g.Replicas})
	}
	return out
}

// Unreadable says why the job as stored could not be decoded whole (v1beta1.Job.Unreadable),
// naming the field; "" when it could.
func Unreadable(job client.Object) string {
	if j, ok := job.(v1beta1.Job); ok {
		return j.Unreadable()
	}
	return ""
}

// CannotAct is the error for doing something to an unreadable job: it has no spec here, so
// devctl would act on nothing the user wrote. It names the field and what to do about it.
func CannotAct(job client.Object, doing string) error {
	return fmt.Errorf("cannot %s %s in namespace %s: it is unreadable (%s); %s", doing, Ref(job), job.GetNamespace(), Unreadable(job), v1beta1.UnreadableHint)
}

// Ref names a job the way kubectl does: "tfjob/distributed".
func Ref(job client.Object) string { return KindOf(job).Ref(job.GetName()) }

// ReplicaNames lists a job's replicas in spec order the way the output names them: master-0,
// worker-0, worker-1, ps-0; scheduler-0, server-0, worker-0.
func ReplicaNames(job client.Object) []string {
	if job == nil || KindOf(job) == nil {
		return nil
	}
	var names []string
	for _, g := range GroupsOf(job) {
		n := g.Replicas
		if n < 1 {
			n = 1 // the apiserver's default; a job read from a file may not have it yet
		}
		for i := range n {
			names = append(names, g.Type+"-"+strconv.Itoa(int(i)))
		}
	}
	return names
}

// containerOf is the status of the container that decides the pod's replica: the one its
// job's kind names (the pod's mlkube.io/job-kind label says which), else the first.
func containerOf(pod *corev1.Pod) *corev1.ContainerStatus {
	name := containerName(pod)
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	if len(pod.Status.ContainerStatuses) > 0 {
		return &pod.Status.ContainerStatuses[0]
	}
	return nil
}

// containerName is the name of the container that decides the pod's replica: the one the kind of
// its mlkube.io/job-kind label names. A pod without that label (made by hand, or by an older
// operator) is taken to be of the first kind of the table whose container it has, else its first
// container decides.
func containerName(pod *corev1.Pod) string {
	if k := v1beta1.KindNamed(pod.Labels[v1beta1.LabelJobKind]); k != nil {
		return k.Container
	}
	for _, k := range v1beta1.Kinds {
		for _, c := range pod.Spec.Containers {
			if c.Name == k.Container {
				return k.Container
			}
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}
