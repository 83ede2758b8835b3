package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JAXReplicaType is a role in a multi-process JAX job (jax.distributed). There is one: every
// process is a worker, and worker 0 also runs the coordination service, as Kubeflow's JAXJob
// (its one replica type, Worker).
// +kubebuilder:validation:Enum=WORKER
type JAXReplicaType string

const (
	JAXReplicaWorker JAXReplicaType = "WORKER"
)

// JAXContainerName is the container of each replica that gets the jax.distributed env and whose
// exit code decides the replica's outcome (Kubeflow's JAXJobDefaultContainerName).
const JAXContainerName = "jax"

// JAXReplicaSpec is the replica group of a JAXJob.
type JAXReplicaSpec struct {
	// jaxReplicaType is the role: WORKER, the only one. Worker i is JAX process i; worker 0
	// also serves the coordination service every process connects to, and its exit decides
	// the job.
	// +required
	JAXReplicaType JAXReplicaType `json:"jaxReplicaType"`

	// replicas is the number of pods, one JAX process each (default 1).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// port is the port each replica listens on (default 6666). Worker 0's is COORDINATOR_PORT.
	// +kubebuilder:default=6666
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// restartPolicy says what happens when the jax container exits, as for TfJob: ExitCode
	// (default; 0 done, 1-127 permanent failure, 128-255 retryable, OOMKilled permanent),
	// OnFailure, Always or Never.
	// +kubebuilder:default=ExitCode
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// template is the pod each replica runs. One container must be named jax.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// JAXJobSpec is a multi-process JAX job: its replica group and how it runs.
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.exists(r, r.jaxReplicaType == 'WORKER')",message="replicaSpecs needs a WORKER group: its processes are the job's, worker 0 the coordinator every process connects to, whose exit decides the job"
type JAXJobSpec struct {
	// replicaSpecs is the replica group, a WORKER one. It cannot change once the job exists:
	// running processes were told NUM_PROCESSES. While the job is suspended, its template's
	// labels, annotations, nodeSelector, tolerations and schedulingGates may change: what Kueue
	// sets when it admits the job.
	// +listType=map
	// +listMapKey=jaxReplicaType
	// +kubebuilder:validation:MaxItems=1
	// +required
	ReplicaSpecs []JAXReplicaSpec `json:"replicaSpecs"`

	// runPolicy governs the job as a whole: clean-up, retries, deadline and TTL.
	// +kubebuilder:default={}
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
}

// JAXJob runs multi-process JAX (jax.distributed) on the same engine as TfJob: one pod per
// process in the job's headless service, COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES
// and PROCESS_ID in every pod, as Kubeflow's JAXJob sets them, restarts by exit code, and the
// same status. A process passes them to jax.distributed.initialize: coordinator_address is
// COORDINATOR_ADDRESS:COORDINATOR_PORT (JAX takes host and port as one string),
// num_processes is NUM_PROCESSES and process_id is PROCESS_ID.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=jaxjobs,singular=jaxjob,shortName=jaxj,categories=mlkube
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`,priority=1,description="why the job is not running, when it waits: ImagePullBackOff, Unschedulable, ..."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.replicas`,description="ready/total pods per replica type"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,description="how far training is, as its trainers report it: percent done, or the step"
// +kubebuilder:printcolumn:name="Time Left",type=string,JSONPath=`.status.progress.remaining`,priority=1,description="the operator's estimate from the recent step rate"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JAXJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   JAXJobSpec `json:"spec"`
	Status JobStatus  `json:"status,omitempty"`

	// unreadable says why the stored job could not be decoded whole (unreadable.go). It is never
	// serialized; controller-gen wants every field tagged, and "-" keeps it out of the CRD.
	unreadable string `json:"-"`
}

// JAXJobList is a list of JAXJobs.
//
// +kubebuilder:object:root=true
type JAXJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JAXJob `json:"items"`
}

// jaxJobKind is JAXJob in the kinds table.
var jaxJobKind = &Kind{
	Name: "JAXJob", Plural: "jaxjobs", Container: JAXContainerName, TypeField: "jaxReplicaType", PortField: "port",
	Types: []string{string(JAXReplicaWorker)},
	// Worker 0 is process 0, the coordinator, and ends the training for everyone.
	Deciders: []string{string(JAXReplicaWorker)},
	// Worker 0's coordination service listens on it when port is unset (Kubeflow's JAXJobDefaultPort).
	DefaultPort: 6666,
	Order:       4,
	Told:        "running processes were told NUM_PROCESSES",
	Gets:        "COORDINATOR_ADDRESS, PROCESS_ID and the rest",
	New:         func() Job { return &JAXJob{} }, NewList: func() List { return &JAXJobList{} },
}

func init() { addKind(jaxJobKind, &JAXJob{}, &JAXJobList{}) }

// Groups lists the replica groups, defaults applied.
func (j *JAXJob) Groups() []ReplicaGroup {
	var out []ReplicaGroup
	for i := range j.Spec.ReplicaSpecs {
		rs := &j.Spec.ReplicaSpecs[i]
		out = append(out, withDefaults(ReplicaGroup{Type: string(rs.JAXReplicaType), Replicas: max(rs.Replicas, 1), Port: rs.Port,
			RestartPolicy: rs.RestartPolicy, Template: &rs.Template}, jaxJobKind.DefaultPort))
	}
	return out
}

func (j *JAXJob) Policy() RunPolicy     { return j.Spec.RunPolicy }
func (j *JAXJob) SetSuspend(s bool)     { j.Spec.RunPolicy.Suspend = &s }
func (j *JAXJob) JobStatus() *JobStatus { return &j.Status }

// UnmarshalJSON decodes a JAXJob leniently (see decodeJob in unreadable.go).
func (j *JAXJob) UnmarshalJSON(data []byte) (err error) {
	type plain JAXJob
	j.unreadable, err = decodeJob(data, (*plain)(j), func() { *j = JAXJob{} }, &j.TypeMeta, &j.ObjectMeta, &j.Status)
	return err
}

func (j *JAXJob) Unreadable() string { return j.unreadable }
