package v1beta1

import (
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Job is what every job kind is to the engine, devctl, the dashboard and the tests: replica
// groups, a run policy and the one status every kind shares. Nothing outside a kind's own API
// file and framework package needs to know which kind a job is.
// +kubebuilder:object:generate=false
type Job interface {
	metav1.Object
	runtime.Object
	// Groups lists the replica groups in spec order, the apiserver's defaults applied (a job
	// read from a file, or stored before a default existed, may not have them).
	Groups() []ReplicaGroup
	// Policy is the job's run policy.
	Policy() RunPolicy
	// SetSuspend sets runPolicy.suspend (Kueue's integration suspends and resumes jobs).
	SetSuspend(suspend bool)
	// JobStatus points into the job's status, which the operator fills in.
	JobStatus() *JobStatus
	// Unreadable says why the job as stored could not be decoded whole, naming the field
	// (unreadable.go); "" when it was. An unreadable job has its metadata and, when that
	// reads, its status, but an empty spec: nothing may act on it.
	Unreadable() string
}

// ReplicaGroup is one replica group of a job, whatever its kind.
// +kubebuilder:object:generate=false
type ReplicaGroup struct {
	// Type is the replica type as the spec spells it, e.g. WORKER.
	Type          string
	Replicas      int32
	Port          int32
	RestartPolicy RestartPolicy
	Template      *corev1.PodTemplateSpec
}

// Kind describes one job kind.
// +kubebuilder:object:generate=false
type Kind struct {
	// Name is the kind as manifests spell it: TfJob.
	Name string
	// Plural is its resource: tfjobs.
	Plural string
	// Container is the container of each replica that gets the framework's env and whose exit
	// code decides the replica's outcome.
	Container string
	// TypeField is the field of a replica group that holds its type: tfReplicaType.
	TypeField string
	// PortField is the field of a replica group that holds its port: tfPort.
	PortField string
	// DefaultPort is the port of a replica group that leaves PortField unset: 2222. The CRD
	// defaults the field to it through a +kubebuilder:default marker, which cannot read Go
	// values; TestEachCRDMatchesItsGoTypes (operator/config) holds the two together.
	DefaultPort int32
	// Types are the replica types, as the CRD's enum lists them.
	Types []string
	// Deciders are the types whose replica 0 decides that a job succeeded: the first of them
	// that the job has (Decider). The CRD requires a job to have one.
	Deciders []string
	// Told is what a running replica was told of the job's shape: why its groups cannot change
	// unless it is suspended, in the admission policy's refusal (operator/admission).
	Told string
	// Gets is what the operator gives the framework's container ("TF_CONFIG"), as the CRD's
	// refusal of a group without that container says it (hack/crdrules).
	Gets string
	// Order is where the kind is listed: in the order kinds were added to mlkube.
	Order int
	// New and NewList make empty objects of the kind.
	New     func() Job
	NewList func() List
}

// List is a list of jobs of one kind.
// +kubebuilder:object:generate=false
type List interface {
	metav1.ListInterface
	runtime.Object
}

// Label is the kind in lower case: the value of the pods' mlkube.io/job-kind label and the
// resource in "tfjob/name".
func (k *Kind) Label() string { return strings.ToLower(k.Name) }

// GVR is the kind's resource, for dynamic clients.
func (k *Kind) GVR() schema.GroupVersionResource { return GroupVersion.WithResource(k.Plural) }

// CRD is the name of the kind's CustomResourceDefinition: tfjobs.mlkube.io.
func (k *Kind) CRD() string { return k.Plural + "." + GroupVersion.Group }

// Decider is the replica type whose replica 0 exiting 0 ends a job of these groups in success:
// the first of the kind's Deciders that the job has, or "" when it has none (a job the CRD
// did not check, read from a file).
func (k *Kind) Decider(groups []ReplicaGroup) string {
	for _, d := range k.Deciders {
		for _, g := range groups {
			if g.Type == d {
				return d
			}
		}
	}
	return ""
}

// Ref names a job of the kind the way kubectl does: "mxjob/mx-distributed".
func (k *Kind) Ref(name string) string { return k.Label() + "/" + name }

// Labels on every replica pod and service the operator creates, whatever the kind: selecting
// by them is how the operator, kubectl, devctl and the dashboard find a job's replicas.
const (
	LabelJobName      = "mlkube.io/job-name"
	LabelJobKind      = "mlkube.io/job-kind" // the kind's Label()
	LabelReplicaType  = "mlkube.io/replica-type"
	LabelReplicaIndex = "mlkube.io/replica-index"
)

// LabelTensorboard marks the pod of a job's TensorBoard (a TfJob's spec.tensorboard), beside the
// job's name and kind labels: what the TensorBoard's Deployment and Service select.
const LabelTensorboard = "mlkube.io/tensorboard"

// Kinds lists every job kind, in Order (TfJob first). Each kind's API file adds itself.
var Kinds []*Kind

func addKind(k *Kind, job Job, list List) {
	Kinds = append(Kinds, k)
	slices.SortFunc(Kinds, func(a, b *Kind) int { return a.Order - b.Order })
	SchemeBuilder.Register(job, list)
}

// Labels lists the kinds' labels, e.g. for a message: "tfjob, mxjob, pytorchjob".
func Labels() []string {
	var out []string
	for _, k := range Kinds {
		out = append(out, k.Label())
	}
	return out
}

// KindNames names every kind, for a sentence: "TfJob, MXJob and PyTorchJob" with conj "and".
func KindNames(conj string) string {
	var names []string
	for _, k := range Kinds {
		names = append(names, k.Name)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// KindOf is the kind of a job; nil for an object that is no job of ours.
func KindOf(obj runtime.Object) *Kind {
	for _, k := range Kinds {
		if sameType(k.New(), obj) {
			return k
		}
	}
	return nil
}

// KindNamed finds a kind by its name, its label or its plural, in any case: "mxjob", "MXJob",
// "mxjobs"; nil when none has it.
func KindNamed(name string) *Kind {
	for _, k := range Kinds {
		if strings.EqualFold(name, k.Name) || strings.EqualFold(name, k.Plural) {
			return k
		}
	}
	return nil
}

func sameType(a, b runtime.Object) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }

// withDefaults fills what the apiserver defaults in a group, when unset: port and restart
// policy. Each kind defaults replicas itself.
func withDefaults(g ReplicaGroup, port int32) ReplicaGroup {
	if g.Port == 0 {
		g.Port = port
	}
	if g.RestartPolicy == "" {
		g.RestartPolicy = RestartPolicyExitCode
	}
	return g
}
