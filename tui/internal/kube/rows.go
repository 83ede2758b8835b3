package kube

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The watches keep these rows, not the objects they come from: a transform turns each object
// into its row as it arrives, so neither the informers' stores nor the UI hold managedFields,
// pod specs or annotations. A row is never changed once made; a change is a new row.

// meta is the part of an object's metadata a row keeps: what the informer needs to key it and
// tell versions apart, and the creation time for the AGE column.
func meta(m metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.GetName(),
		Namespace:         m.GetNamespace(),
		UID:               m.GetUID(),
		ResourceVersion:   m.GetResourceVersion(),
		CreationTimestamp: m.GetCreationTimestamp(),
		DeletionTimestamp: m.GetDeletionTimestamp(),
	}
}

// JobKey names a job.
type JobKey struct {
	Kind      string
	Namespace string
	Name      string
}

func (k JobKey) String() string { return k.Namespace + "/" + k.Name }

// Job is a row of the job list: a job of any kind of the table, as the dashboard shows it.
type Job struct {
	metav1.ObjectMeta
	Kind        string
	State       string
	Phase       string
	Replicas    string // status.replicas, e.g. "master 1/1 worker 2/2 ps 2/2"
	Restarts    int32
	Conditions  []Condition
	Tensorboard *Tensorboard
	// Progress is status.progress, as the trainers last reported it; nil when they never did.
	Progress *v1beta1.JobProgress
	// FirstFailure is status.firstFailure: the replica that failed first; nil when none did.
	FirstFailure *v1beta1.ReplicaFailure
	// Stalls is status.stalls: the restarts after progressDeadlineSeconds ran out.
	Stalls int32
	// Unreadable says why the job as stored cannot be read whole, naming the field
	// (v1beta1.Job.Unreadable): the operator cannot act on it. "" when it can be read.
	Unreadable string
}

// Key names the job.
func (j *Job) Key() JobKey { return JobKey{Kind: j.Kind, Namespace: j.Namespace, Name: j.Name} }

// Condition is one of a job's status.conditions.
type Condition struct {
	Type, Status, Reason, Message string
	LastTransition                time.Time
}

// Tensorboard is a job's status.tensorboard.
type Tensorboard struct {
	ServiceName string
	URL         string
	ProxyPath   string
	Ready       bool
}

// Replica is a row of the replica table: one replica pod.
type Replica struct {
	metav1.ObjectMeta
	Type        string // replica type label, lower case: worker
	Index       int    // replica index label; -1 when missing
	Phase       string // pod phase, or Terminating
	Ready       bool
	Container   string // the container the row describes: the kind's, else the first
	ContainerID string // changes when the container restarts
	Waiting     string // the container's waiting reason, e.g. ErrImagePull
	Running     bool   // the container is running now
	Exited      bool   // ExitCode and ExitReason are set
	ExitCode    int32  // of the container's last termination
	ExitReason  string
	Restarts    int32
	Node        string
	Containers  []string  // every container of the pod, for the log pane
	Controller  types.UID // the UID of the pod's controlling owner; "" when it has none
}

// Event is an events.k8s.io/v1 Event about a job.
type Event struct {
	metav1.ObjectMeta
	RegardingUID string
	Type         string
	Reason       string
	Note         string
	Count        int32
	Last         time.Time
}

// The informers need runtime.Objects; the rows are immutable, so a copy can be the row itself.

func (j *Job) GetObjectKind() schema.ObjectKind     { return schema.EmptyObjectKind }
func (j *Job) DeepCopyObject() runtime.Object       { return j }
func (r *Replica) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (r *Replica) DeepCopyObject() runtime.Object   { return r }
func (e *Event) GetObjectKind() schema.ObjectKind   { return schema.EmptyObjectKind }
func (e *Event) DeepCopyObject() runtime.Object     { return e }
