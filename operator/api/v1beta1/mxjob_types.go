package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MXReplicaType is a role in an MXNet parameter-server cluster.
// +kubebuilder:validation:Enum=SCHEDULER;SERVER;WORKER
type MXReplicaType string

const (
	MXReplicaScheduler MXReplicaType = "SCHEDULER"
	MXReplicaServer    MXReplicaType = "SERVER"
	MXReplicaWorker    MXReplicaType = "WORKER"
)

// MXContainerName is the container of each replica that gets the DMLC_* env and whose exit code
// decides the replica's outcome.
const MXContainerName = "mxnet"

// MXReplicaSpec is one replica group of an MXJob.
// +kubebuilder:validation:XValidation:rule="self.mxReplicaType != 'SCHEDULER' || self.replicas == 1",message="the SCHEDULER group has exactly one replica: set replicas: 1"
type MXReplicaSpec struct {
	// mxReplicaType is the role: SCHEDULER (exactly one; it coordinates and its exit decides the
	// job), SERVER (holds the parameters) or WORKER (computes).
	// +required
	MXReplicaType MXReplicaType `json:"mxReplicaType"`

	// replicas is the number of pods of this type (default 1).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// port is the port the replica listens on (default 9091). The scheduler's is passed to
	// every replica as DMLC_PS_ROOT_PORT.
	// +kubebuilder:default=9091
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// restartPolicy says what happens when the mxnet container exits, as for TfJob: ExitCode
	// (default; 0 done, 1-127 permanent failure, 128-255 retryable, OOMKilled permanent),
	// OnFailure, Always or Never.
	// +kubebuilder:default=ExitCode
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// template is the pod each replica runs. One container must be named mxnet.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// MXJobSpec is a distributed MXNet job: its replica groups and how it runs.
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.exists(r, r.mxReplicaType == 'SCHEDULER')",message="replicaSpecs needs a SCHEDULER group: every replica finds the cluster through it, and its exit decides the job"
type MXJobSpec struct {
	// replicaSpecs are the replica groups, one per mxReplicaType. They cannot change once the
	// job exists: running replicas were told how many servers and workers there are. While the
	// job is suspended, their templates' labels, annotations, nodeSelector, tolerations and
	// schedulingGates may change: what Kueue sets when it admits the job.
	// +listType=map
	// +listMapKey=mxReplicaType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +required
	ReplicaSpecs []MXReplicaSpec `json:"replicaSpecs"`

	// runPolicy governs the job as a whole: clean-up, retries, deadline and TTL.
	// +kubebuilder:default={}
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
}

// MXJob runs distributed MXNet on the same engine as TfJob: one pod per replica and one headless
// service per job, the DMLC_* env in every pod, restarts by exit code, and the same status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mxjobs,singular=mxjob,shortName=mxj,categories=mlkube
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`,priority=1,description="why the job is not running, when it waits: ImagePullBackOff, Unschedulable, ..."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.replicas`,description="ready/total pods per replica type"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,description="how far training is, as its trainers report it: percent done, or the step"
// +kubebuilder:printcolumn:name="Time Left",type=string,JSONPath=`.status.progress.remaining`,priority=1,description="the operator's estimate from the recent step rate"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MXJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   MXJobSpec `json:"spec"`
	Status JobStatus `json:"status,omitempty"`

	// unreadable says why the stored job could not be decoded whole (unreadable.go). It is never
	// serialized; controller-gen wants every field tagged, and "-" keeps it out of the CRD.
	unreadable string `json:"-"`
}

// MXJobList is a list of MXJobs.
//
// +kubebuilder:object:root=true
type MXJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MXJob `json:"items"`
}

// mxJobKind is MXJob in the kinds table.
var mxJobKind = &Kind{
	Name: "MXJob", Plural: "mxjobs", Container: MXContainerName, TypeField: "mxReplicaType", PortField: "port",
	Types: []string{string(MXReplicaScheduler), string(MXReplicaServer), string(MXReplicaWorker)},
	// MXNet's scheduler exits once every worker has finished.
	Deciders: []string{string(MXReplicaScheduler)},
	// Each replica listens on it when port is unset; the scheduler's is DMLC_PS_ROOT_PORT.
	DefaultPort: 9091,
	Order:       2,
	Told:        "running replicas were told how many servers and workers there are",
	Gets:        "the DMLC_* env",
	New:         func() Job { return &MXJob{} }, NewList: func() List { return &MXJobList{} },
}

func init() { addKind(mxJobKind, &MXJob{}, &MXJobList{}) }

// Groups lists the replica groups, defaults applied.
func (j *MXJob) Groups() []ReplicaGroup {
	var out []ReplicaGroup
	for i := range j.Spec.ReplicaSpecs {
		rs := &j.Spec.ReplicaSpecs[i]
		out = append(out, withDefaults(ReplicaGroup{Type: string(rs.MXReplicaType), Replicas: max(rs.Replicas, 1), Port: rs.Port,
			RestartPolicy: rs.RestartPolicy, Template: &rs.Template}, mxJobKind.DefaultPort))
	}
	return out
}

func (j *MXJob) Policy() RunPolicy     { return j.Spec.RunPolicy }
func (j *MXJob) SetSuspend(s bool)     { j.Spec.RunPolicy.Suspend = &s }
func (j *MXJob) JobStatus() *JobStatus { return &j.Status }

// UnmarshalJSON decodes an MXJob leniently (see decodeJob in unreadable.go).
func (j *MXJob) UnmarshalJSON(data []byte) (err error) {
	type plain MXJob
	j.unreadable, err = decodeJob(data, (*plain)(j), func() { *j = MXJob{} }, &j.TypeMeta, &j.ObjectMeta, &j.Status)
	return err
}

func (j *MXJob) Unreadable() string { return j.unreadable }
