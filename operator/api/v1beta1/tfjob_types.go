package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TfReplicaType is a role in a distributed TensorFlow cluster.
// +kubebuilder:validation:Enum=MASTER;CHIEF;WORKER;PS;EVALUATOR
type TfReplicaType string

const (
	TfReplicaMaster    TfReplicaType = "MASTER"
	TfReplicaChief     TfReplicaType = "CHIEF"
	TfReplicaWorker    TfReplicaType = "WORKER"
	TfReplicaPS        TfReplicaType = "PS"
	TfReplicaEvaluator TfReplicaType = "EVALUATOR"
)

// TfContainerName is the container of each replica that gets TF_CONFIG and whose exit code
// decides the replica's outcome.
const TfContainerName = "tensorflow"

// TfReplicaSpec is one replica group: a role, how many pods play it, and the pod to run.
// +kubebuilder:validation:XValidation:rule="!(self.tfReplicaType in ['MASTER', 'CHIEF']) || self.replicas == 1",message="a MASTER or CHIEF group has exactly one replica: set replicas: 1 (use WORKER for more)"
type TfReplicaSpec struct {
	// tfReplicaType is the role: MASTER or CHIEF (at most one of them, one replica, decides when
	// the job is done), WORKER, PS (parameter servers; they never keep a job alive) or EVALUATOR.
	// +required
	TfReplicaType TfReplicaType `json:"tfReplicaType"`

	// replicas is the number of pods of this type (default 1).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// tfPort is the port TensorFlow's gRPC server listens on in each pod (default 2222). It goes
	// into TF_CONFIG and the tensorflow container's port.
	// +kubebuilder:default=2222
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	TfPort int32 `json:"tfPort,omitempty"`

	// restartPolicy says what happens when the tensorflow container exits: ExitCode (default;
	// 0 done, 1-127 permanent failure, 128-255 retryable, OOMKilled permanent), OnFailure and
	// Always (the kubelet restarts the container in place), or Never (any failure fails the job).
	// +kubebuilder:default=ExitCode
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// template is the pod each replica runs. One container must be named tensorflow.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// TensorboardSpec asks for a TensorBoard serving the job's logs.
type TensorboardSpec struct {
	// logDir is the directory TensorBoard reads event files from, as seen inside its pod
	// (mount it with volumes and volumeMounts).
	// +kubebuilder:validation:MinLength=1
	// +required
	LogDir string `json:"logDir"`

	// image runs TensorBoard: it needs a tensorboard program on its PATH, which the operator
	// runs with --logdir, --host and --port. Changes after creation are refused.
	// +kubebuilder:default="tensorflow/tensorflow:2.16.1"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Image string `json:"image,omitempty"`

	// serviceType is the type of the <job>-tensorboard Service (default ClusterIP).
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// volumes are added to the TensorBoard pod, typically the one holding logDir.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// volumeMounts are added to the TensorBoard container; each names one of volumes.
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// podLabels are added to the TensorBoard pod (and only to it: the Deployment selects it by
	// the operator's own labels, which win over these), e.g. to opt it into a service mesh.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// podAnnotations are added to the TensorBoard pod, e.g. to have it scraped.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
}

// TfJobSpec is a distributed TensorFlow job: its replica groups and how it runs.
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.filter(r, r.tfReplicaType in ['MASTER', 'CHIEF']).size() <= 1",message="at most one of MASTER and CHIEF: both name the replica that decides when the job is done"
// +kubebuilder:validation:XValidation:rule="self.replicaSpecs.exists(r, r.tfReplicaType in ['MASTER', 'CHIEF', 'WORKER'])",message="replicaSpecs needs a MASTER, CHIEF or WORKER group: one of them decides when the job is done"
type TfJobSpec struct {
	// replicaSpecs are the replica groups, one per tfReplicaType. They cannot change once the
	// job exists: running replicas already hold a TF_CONFIG that names every other replica.
	// While the job is suspended, their templates' labels, annotations, nodeSelector,
	// tolerations and schedulingGates may change: what Kueue sets when it admits the job.
	// +listType=map
	// +listMapKey=tfReplicaType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +required
	ReplicaSpecs []TfReplicaSpec `json:"replicaSpecs"`

	// tensorboard, when set, runs a TensorBoard Deployment and a <job>-tensorboard Service for
	// the job; status.tensorboard carries the link. It cannot be changed once set; removing it
	// removes TensorBoard.
	// +optional
	Tensorboard *TensorboardSpec `json:"tensorboard,omitempty"`

	// runPolicy governs the job as a whole: clean-up, retries, deadline and TTL.
	// +kubebuilder:default={}
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
}

// TfJob runs distributed TensorFlow: one pod per replica and one headless service per job,
// TF_CONFIG in every pod, restarts by exit code, and a status that says how it is going.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=tfjobs,singular=tfjob,shortName=tfj,categories=mlkube
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Running")].reason`,priority=1,description="why the job is not running, when it waits: ImagePullBackOff, Unschedulable, ..."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.replicas`,description="ready/total pods per replica type"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,description="how far training is, as its trainers report it: percent done, or the step"
// +kubebuilder:printcolumn:name="Time Left",type=string,JSONPath=`.status.progress.remaining`,priority=1,description="the operator's estimate from the recent step rate"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TfJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   TfJobSpec `json:"spec"`
	Status JobStatus `json:"status,omitempty"`

	// unreadable says why the stored job could not be decoded whole (unreadable.go). It is never
	// serialized; controller-gen wants every field tagged, and "-" keeps it out of the CRD.
	unreadable string `json:"-"`
}

// TfJobList is a list of TfJobs.
//
// +kubebuilder:object:root=true
type TfJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TfJob `json:"items"`
}

// tfJobKind is TfJob in the kinds table.
var tfJobKind = &Kind{
	Name: "TfJob", Plural: "tfjobs", Container: TfContainerName, TypeField: "tfReplicaType", PortField: "tfPort",
	Types: []string{string(TfReplicaMaster), string(TfReplicaChief), string(TfReplicaWorker), string(TfReplicaPS), string(TfReplicaEvaluator)},
	// The MASTER or CHIEF (a job has at most one of them) ends the training for everyone; without
	// one, worker 0 does, as Kubeflow's TFJob had it. Parameter servers never end on their own, so
	// they never decide.
	Deciders: []string{string(TfReplicaMaster), string(TfReplicaChief), string(TfReplicaWorker)},
	// TensorFlow's gRPC server listens on it in each pod when tfPort is unset.
	DefaultPort: 2222,
	Order:       1,
	Told:        "running replicas already hold a TF_CONFIG naming every replica",
	Gets:        "TF_CONFIG",
	New:         func() Job { return &TfJob{} }, NewList: func() List { return &TfJobList{} },
}

func init() { addKind(tfJobKind, &TfJob{}, &TfJobList{}) }

// Groups lists the replica groups, defaults applied.
func (j *TfJob) Groups() []ReplicaGroup {
	var out []ReplicaGroup
	for i := range j.Spec.ReplicaSpecs {
		rs := &j.Spec.ReplicaSpecs[i]
		replicas := rs.Replicas
		if replicas == 0 {
			replicas = 1 // unset; a count out of range stays, to be refused as it is
		}
		out = append(out, withDefaults(ReplicaGroup{Type: string(rs.TfReplicaType), Replicas: replicas, Port: rs.TfPort,
			RestartPolicy: rs.RestartPolicy, Template: &rs.Template}, tfJobKind.DefaultPort))
	}
	return out
}

func (j *TfJob) Policy() RunPolicy     { return j.Spec.RunPolicy }
func (j *TfJob) SetSuspend(s bool)     { j.Spec.RunPolicy.Suspend = &s }
func (j *TfJob) JobStatus() *JobStatus { return &j.Status }

// UnmarshalJSON decodes a TfJob leniently (see decodeJob in unreadable.go).
func (j *TfJob) UnmarshalJSON(data []byte) (err error) {
	type plain TfJob
	j.unreadable, err = decodeJob(data, (*plain)(j), func() { *j = TfJob{} }, &j.TypeMeta, &j.ObjectMeta, &j.Status)
	return err
}

func (j *TfJob) Unreadable() string { return j.unreadable }
