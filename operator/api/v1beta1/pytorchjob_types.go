package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PyTorchReplicaType is a role in a distributed PyTorch job (torch.distributed).
// +kubebuilder:validation:Enum=MASTER;WORKER
type PyTorchReplicaType string

const (
	PyTorchReplicaMaster PyTorchReplicaType = "MASTER"
	PyTorchReplicaWorker PyTorchReplicaType = "WORKER"
)

// PyTorchContainerName is the container of each replica that gets the torch.distributed env
// and whose exit code decides the replica's outcome.
const PyTorchContainerName = "pytorch"

// PyTorchReplicaSpec is one replica group of a PyTorchJob.
// +kubebuilder:validation:XValidation:rule="self.pytorchReplicaType != 'MASTER' || self.replicas == 1",message="the MASTER group has exactly one replica (rank 0): set replicas: 1 (use WORKER for more)"
type PyTorchReplicaSpec struct {
	// pytorchReplicaType is the role: MASTER (exactly one; rank 0, where every rank meets, and
	// its exit decides the job) or WORKER (ranks 1 and up).
	// +required
	PyTorchReplicaType PyTorchReplicaType `json:"pytorchReplicaType"`

	// replicas is the number of pods of this type (default 1).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// port is the port each replica listens on (default 23456). The master's is MASTER_PORT.
	// +kubebuilder:default=23456
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// restartPolicy says what happens when the pytorch container exits, as for TfJob: ExitCode
	// (default; 0 done, 1-127 permanent failure, 128-255 retryable, OOMKilled permanent),
	// OnFailure, Always or Never.
	// +kubebuilder:default=ExitCode
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// template is the pod each replica runs. One container must be named pytorch.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// PyTorchJobSpec is a distributed PyTorch job: its replica groups and how it runs.
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.exists(r, r.pytorchReplicaType == 'MASTER')",message="replicaSpecs needs a MASTER group: it is rank 0, where every rank meets, and its exit decides the job"
type PyTorchJobSpec struct {
	// replicaSpecs are the replica groups, one per pytorchReplicaType. They cannot change once
	// the job exists: running replicas were told WORLD_SIZE. While the job is suspended, their
	// templates' labels, annotations, nodeSelector, tolerations and schedulingGates may change:
	// what Kueue sets when it admits the job.
	// +listType=map
	// +listMapKey=pytorchReplicaType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +required
	ReplicaSpecs []PyTorchReplicaSpec `json:"replicaSpecs"`

	// runPolicy governs the job as a whole: clean-up, retries, deadline and TTL.
	// +kubebuilder:default={}
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
}

// PyTorchJob runs distributed PyTorch (torch.distributed, torchrun) on the same engine as TfJob:
// one pod per replica and one headless service per job, MASTER_ADDR, MASTER_PORT, WORLD_SIZE
// and RANK (and torchrun's PET_* twins) in every pod, restarts by exit code, and the same status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=pytorchjobs,singular=pytorchjob,shortName=ptj,categories=mlkube
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`,priority=1,description="why the job is not running, when it waits: ImagePullBackOff, Unschedulable, ..."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.replicas`,description="ready/total pods per replica type"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,description="how far training is, as its trainers report it: percent done, or the step"
// +kubebuilder:printcolumn:name="Time Left",type=string,JSONPath=`.status.progress.remaining`,priority=1,description="the operator's estimate from the recent step rate"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PyTorchJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   PyTorchJobSpec `json:"spec"`
	Status JobStatus      `json:"status,omitempty"`

	// unreadable says why the stored job could not be decoded whole (unreadable.go). It is never
	// serialized; controller-gen wants every field tagged, and "-" keeps it out of the CRD.
	unreadable string `json:"-"`
}

// PyTorchJobList is a list of PyTorchJobs.
//
// +kubebuilder:object:root=true
type PyTorchJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PyTorchJob `json:"items"`
}

// pyTorchJobKind is PyTorchJob in the kinds table.
var pyTorchJobKind = &Kind{
	Name: "PyTorchJob", Plural: "pytorchjobs", Container: PyTorchContainerName, TypeField: "pytorchReplicaType", PortField: "port",
	Types: []string{string(PyTorchReplicaMaster), string(PyTorchReplicaWorker)},
	// The master, rank 0, ends the training for everyone.
	Deciders: []string{string(PyTorchReplicaMaster)},
	// The master's rendezvous listens on it when port is unset.
	DefaultPort: 23456,
	Order:       3,
	Told:        "running replicas were told WORLD_SIZE",
	Gets:        "MASTER_ADDR, RANK and the rest",
	New:         func() Job { return &PyTorchJob{} }, NewList: func() List { return &PyTorchJobList{} },
}

func init() { addKind(pyTorchJobKind, &PyTorchJob{}, &PyTorchJobList{}) }

// Groups lists the replica groups, defaults applied.
func (j *PyTorchJob) Groups() []ReplicaGroup {
	var out []ReplicaGroup
	for i := range j.Spec.ReplicaSpecs {
		rs := &j.Spec.ReplicaSpecs[i]
		out = append(out, withDefaults(ReplicaGroup{Type: string(rs.PyTorchReplicaType), Replicas: max(rs.Replicas, 1), Port: rs.Port,
			RestartPolicy: rs.RestartPolicy, Template: &rs.Template}, pyTorchJobKind.DefaultPort))
	}
	return out
}

func (j *PyTorchJob) Policy() RunPolicy     { return j.Spec.RunPolicy }
func (j *PyTorchJob) SetSuspend(s bool)     { j.Spec.RunPolicy.Suspend = &s }
func (j *PyTorchJob) JobStatus() *JobStatus { return &j.Status }

// UnmarshalJSON decodes a PyTorchJob leniently (see decodeJob in unreadable.go).
func (j *PyTorchJob) UnmarshalJSON(data []byte) (err error) {
	type plain PyTorchJob
	j.unreadable, err = decodeJob(data, (*plain)(j), func() { *j = PyTorchJob{} }, &j.TypeMeta, &j.ObjectMeta, &j.Status)
	return err
}

func (j *PyTorchJob) Unreadable() string { return j.unreadable }
