package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RestartPolicy says what happens when a replica's training container exits.
// +kubebuilder:validation:Enum=ExitCode;OnFailure;Never;Always
type RestartPolicy string

const (
	// RestartPolicyExitCode decides by the exit code: 0 is done, 1-127 is a permanent failure
	// that fails the job, 128-255 (killed by a signal, e.g. 137) is retryable and the operator
	// recreates the pod, counting the restart against backoffLimit. OOMKilled is permanent.
	RestartPolicyExitCode RestartPolicy = "ExitCode"
	// RestartPolicyOnFailure lets the kubelet restart a failed container in place.
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	// RestartPolicyNever never restarts: any non-zero exit fails the job.
	RestartPolicyNever RestartPolicy = "Never"
	// RestartPolicyAlways lets the kubelet restart the container whenever it exits.
	RestartPolicyAlways RestartPolicy = "Always"
)

// CleanPodPolicy says which pods are deleted once a job has ended.
// +kubebuilder:validation:Enum=Running;All;None
type CleanPodPolicy string

const (
	// CleanPodPolicyRunning deletes the pods still running (typically parameter servers) and
	// keeps the finished ones, so their logs stay readable.
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	// CleanPodPolicyAll deletes every pod of the job.
	CleanPodPolicyAll CleanPodPolicy = "All"
	// CleanPodPolicyNone deletes nothing.
	CleanPodPolicyNone CleanPodPolicy = "None"
)

// RunPolicy governs a job as a whole: its lifetime, its retries and what stays behind.
type RunPolicy struct {
	// cleanPodPolicy says which pods are deleted when the job ends: Running (default) deletes
	// pods still running and keeps finished ones for their logs, All deletes every pod, None
	// keeps them all. Under Running and All the job's headless service is deleted too; None
	// keeps it. A job that hit activeDeadlineSeconds has its running pods stopped even under None.
	// +kubebuilder:default=Running
	// +optional
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// backoffLimit is how many retryable failures (restarts) the job survives, summed over all
	// replicas; one more fails the job. Unset means 3.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the job's running time, counted from status.startTime. When it
	// passes, the job fails with reason DeadlineExceeded and its running pods are stopped. At most
	// 9223372036 (about 292 years), the longest time.Duration: a longer one would wrap around to
	// a deadline already past.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9223372036
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// ttlSecondsAfterFinished deletes the job (and, by owner references, everything it owns) this
	// many seconds after it ended (at most 2147483647, about 68 years). Unset keeps it until you
	// delete it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// suspend, while true, keeps the job without pods: its running pods are deleted and none is
	// created, with condition Suspended. Setting it back to false resumes the job: its replicas
	// are created again. As for Kubernetes Jobs, the activeDeadlineSeconds clock restarts on
	// resume (status.startTime is reset) and pods deleted by a suspension are no failures, while
	// restarts counted before it stay counted. A job created suspended starts only when resumed,
	// the contract queueing systems such as Kueue rely on. While suspended, and in the update
	// that resumes or suspends it, the replica groups' pod templates may take other labels,
	// annotations, nodeSelector, tolerations and schedulingGates, as a suspended Kubernetes
	// Job's may: Kueue sets them when it admits the job and restores them when it evicts it.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// Suspended is whether runPolicy.suspend is true.
func (p RunPolicy) Suspended() bool { return p.Suspend != nil && *p.Suspend }

// DefaultBackoffLimit is the number of restarts a job survives when runPolicy.backoffLimit is unset.
const DefaultBackoffLimit int32 = 3

// JobPhase is the coarse lifecycle step of a job, as in the original TfJob.
type JobPhase string

const (
	JobPhaseCreating  JobPhase = "Creating"
	JobPhaseSuspended JobPhase = "Suspended"
	JobPhaseRunning   JobPhase = "Running"
	JobPhaseCleanUp   JobPhase = "CleanUp"
	JobPhaseFailed    JobPhase = "Failed"
	JobPhaseDone      JobPhase = "Done"
)

// JobState is the outcome of a job, as in the original TfJob.
type JobState string

const (
	JobStateRunning JobState = "Running"
	// JobStateWaiting is a job that has not ended and cannot go on by itself: a replica waits
	// on an image no one can pull, a node that fits, a missing secret. The Running condition
	// says why (its reason, e.g. ImagePullBackOff or Unschedulable) and for which replicas.
	JobStateWaiting   JobState = "Waiting"
	JobStateSucceeded JobState = "Succeeded"
	JobStateFailed    JobState = "Failed"
)

// Condition types a job reports in status.conditions.
const (
	JobCreated    = "Created"
	JobRunning    = "Running"
	JobRestarting = "Restarting"
	JobSucceeded  = "Succeeded"
	JobFailed     = "Failed"
	JobSuspended  = "Suspended"
	// JobCreateRefused is True while the apiserver refuses an object the operator creates for
	// the job (a quota, a policy, an admission webhook); its message is the apiserver's own.
	// It turns False once the object is created. Retried with backoff.
	JobCreateRefused = "CreateRefused"
	// JobUnreadable is True while the job as stored cannot be decoded whole by the operator
	// (a number past its field's range, written before the CRD bounded it); its message names
	// the field. The operator acts on nothing of such a job until it is fixed or deleted.
	JobUnreadable = "Unreadable"
)

// ReplicaStatus counts the pods of one replica type. A count is never negative.
type ReplicaStatus struct {
	// type is the replica type, e.g. WORKER.
	Type string `json:"type"`
	// replicas is the number of replicas the spec asks for.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// pending pods are created but not running yet.
	// +kubebuilder:validation:Minimum=0
	Pending int32 `json:"pending"`
	// active pods are running.
	// +kubebuilder:validation:Minimum=0
	Active int32 `json:"active"`
	// ready pods are running and ready.
	// +kubebuilder:validation:Minimum=0
	Ready int32 `json:"ready"`
	// succeeded pods exited 0.
	// +kubebuilder:validation:Minimum=0
	Succeeded int32 `json:"succeeded"`
	// failed pods exited non-zero and are not being replaced.
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed"`
	// restarts is recreated plus inPlace: every restart of the group's replicas, which counts
	// against backoffLimit.
	// +kubebuilder:validation:Minimum=0
	Restarts int32 `json:"restarts"`
	// recreated counts the pods the operator deleted and created again after a retryable failure.
	// +kubebuilder:validation:Minimum=0
	Recreated int32 `json:"recreated"`
	// inPlace counts the container restarts the kubelet did in place (restartPolicy OnFailure
	// or Always), in the group's pods, pods since deleted included.
	// +kubebuilder:validation:Minimum=0
	// +optional
	InPlace int32 `json:"inPlace,omitempty"`
}

// PodRestarts is how many in-place restarts of a pod's container are counted in inPlace.
type PodRestarts struct {
	// uid is the pod's.
	UID types.UID `json:"uid"`
	// restarts is the container's restartCount when last counted.
	// +kubebuilder:validation:Minimum=0
	Restarts int32 `json:"restarts"`
}

// TensorboardStatus tells where a job's TensorBoard is served.
type TensorboardStatus struct {
	// serviceName is the TensorBoard Service, <job>-tensorboard.
	ServiceName string `json:"serviceName"`
	// url is the in-cluster address of TensorBoard.
	URL string `json:"url"`
	// proxyPath is the path under the apiserver that proxies to TensorBoard, usable with
	// `kubectl proxy` (http://localhost:8001<proxyPath>).
	ProxyPath string `json:"proxyPath"`
	// ready is true once the TensorBoard Deployment has an available replica.
	Ready bool `json:"ready"`
}

// JobStatus is the observed state of a job; the same for every framework.
type JobStatus struct {
	// phase is the lifecycle step: Creating, Running, CleanUp, then Done or Failed; Suspended
	// while runPolicy.suspend holds the job.
	// +optional
	Phase JobPhase `json:"phase,omitempty"`
	// state is the outcome: Running, Succeeded or Failed; Waiting while the job has not ended
	// and cannot go on by itself (the Running condition says why, e.g. ImagePullBackOff).
	// +optional
	State JobState `json:"state,omitempty"`
	// conditions are Created, Running, Restarting, CreateRefused, Suspended, Unreadable, Succeeded
	// and Failed, each with a reason and a message meant for people.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// replicaStatuses counts pods per replica type.
	// +listType=map
	// +listMapKey=type
	// +optional
	ReplicaStatuses []ReplicaStatus `json:"replicaStatuses,omitempty"`
	// replicas summarizes ready/total pods per replica type for `kubectl get`, e.g.
	// "master 1/1 worker 2/2 ps 2/2".
	// +optional
	Replicas string `json:"replicas,omitempty"`
	// restarts is the sum of replicaStatuses[*].restarts.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Restarts int32 `json:"restarts"`
	// startTime is when the operator first acted on the job; activeDeadlineSeconds counts from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the job succeeded or failed; ttlSecondsAfterFinished counts from it.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// tensorboard is set when spec.tensorboard is.
	// +optional
	Tensorboard *TensorboardStatus `json:"tensorboard,omitempty"`
	// observedGeneration is the metadata.generation this status was computed from.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// countedFailures holds the UIDs of failed pods whose restart is already counted, until those
	// pods are gone. Recording the count before deleting the pod is what keeps restart counts exact
	// when the operator is killed between the two.
	// +listType=set
	// +optional
	CountedFailures []types.UID `json:"countedFailures,omitempty"`
	// countedInPlace holds, for each pod whose container restarted in place, how many of those
	// restarts replicaStatuses[*].inPlace already counts, until the pod is gone: a pod deleted
	// (evicted, its node drained) takes its restartCount along, and its restarts stay counted.
	// +listType=map
	// +listMapKey=uid
	// +optional
	CountedInPlace []PodRestarts `json:"countedInPlace,omitempty"`
}
