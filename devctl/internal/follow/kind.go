package follow

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// A Kind is what devctl needs to know of one kind of job to run it, follow it and read its
// logs: its names, the container whose exit decides a replica, its status and its replica
// groups. Everything else (the status, the pod labels, the engine behind them) the kinds share.
type Kind struct {
	// Name is the kind as manifests spell it: TfJob, MXJob.
	Name string
	// Label is the kind in lower case: the value of the pods' mlkube.io/job-kind label, the
	// resource in "mxjob/name", the job's column in the output and devctl logs --kind.
	Label string
	// Container is the container that gets the framework's env and whose exit code decides
	// the replica's outcome.
	Container string

	newObject func() client.Object
	newList   func() client.ObjectList
	status    func(client.Object) *v1beta1.JobStatus
	groups    func(client.Object) []Group
}

// A Group is one replica group of a job: its type as the output names it (master, scheduler)
// and how many replicas it has.
type Group struct {
	Type     string
	Replicas int32
}

// TfJob and MXJob are the kinds devctl runs.
var (
	TfJob = &Kind{
		Name: "TfJob", Label: "tfjob", Container: v1beta1.TfContainerName,
		newObject: func() client.Object { return &v1beta1.TfJob{} },
		newList:   func() client.ObjectList { return &v1beta1.TfJobList{} },
		status:    func(o client.Object) *v1beta1.JobStatus { return &o.(*v1beta1.TfJob).Status },
		groups: func(o client.Object) []Group {
			var out []Group
			for _, r := range o.(*v1beta1.TfJob).Spec.ReplicaSpecs {
				out = append(out, Group{strings.ToLower(string(r.TfReplicaType)), r.Replicas})
			}
			return out
		},
	}
	MXJob = &Kind{
		Name: "MXJob", Label: "mxjob", Container: v1beta1.MXContainerName,
		newObject: func() client.Object { return &v1beta1.MXJob{} },
		newList:   func() client.ObjectList { return &v1beta1.MXJobList{} },
		status:    func(o client.Object) *v1beta1.JobStatus { return &o.(*v1beta1.MXJob).Status },
		groups: func(o client.Object) []Group {
			var out []Group
			for _, r := range o.(*v1beta1.MXJob).Spec.ReplicaSpecs {
				out = append(out, Group{strings.ToLower(string(r.MXReplicaType)), r.Replicas})
			}
			return out
		},
	}
)

// Kinds lists every kind, TfJob first.
var Kinds = []*Kind{TfJob, MXJob}

// KindOf is the kind of a job; nil for an object that is no job.
func KindOf(job client.Object) *Kind {
	switch job.(type) {
	case *v1beta1.TfJob:
		return TfJob
	case *v1beta1.MXJob:
		return MXJob
	}
	return nil
}

// KindNamed finds a kind by its name, its label or its plural, in any case: "mxjob",
// "MXJob", "mxjobs"; nil when none has it.
func KindNamed(name string) *Kind {
	for _, k := range Kinds {
		if strings.EqualFold(name, k.Name) || strings.EqualFold(name, k.Label+"s") {
			return k
		}
	}
	return nil
}

// New returns an empty job of the kind.
func (k *Kind) New() client.Object { return k.newObject() }

// NewList returns an empty list of jobs of the kind.
func (k *Kind) NewList() client.ObjectList { return k.newList() }

// Ref names a job of the kind the way kubectl does: "mxjob/mx-distributed".
func (k *Kind) Ref(name string) string { return k.Label + "/" + name }

// StatusOf is the job's status.
func StatusOf(job client.Object) *v1beta1.JobStatus { return KindOf(job).status(job) }

// GroupsOf lists the job's replica groups in spec order.
func GroupsOf(job client.Object) []Group { return KindOf(job).groups(job) }

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

// containerName is the name of the container that decides the pod's replica. A pod without
// the kind label (made by hand, or by an older operator) is taken to be a TfJob's when it has a
// tensorflow container, else an MXJob's when it has an mxnet one.
func containerName(pod *corev1.Pod) string {
	if k := KindNamed(pod.Labels[replicajob.LabelJobKind]); k != nil {
		return k.Container
	}
	for _, k := range Kinds {
		for _, c := range pod.Spec.Containers {
			if c.Name == k.Container {
				return k.Container
			}
		}
	}
	return v1beta1.TfContainerName
}
