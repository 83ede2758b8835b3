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

	// progressDeadlineSeconds is how long a running job may go without its trainers reporting a
	// larger step (docs/progress.md). The clock starts when every replica is running and starts
	// again with each report whose step is larger than the one before. When it runs out, the job
	// gets condition Progressing=False (reason ProgressDeadlineExceeded) and its replicas are
	// restarted together, counted as one restart against backoffLimit; once backoffLimit is
	// spent the job fails with that reason. A job whose trainers never report is restarted
	// after this long too. Unset: no deadline.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
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
	// JobProgressing is True while the trainers report progress, and False (reason
	// ProgressDeadlineExceeded) once runPolicy.progressDeadlineSeconds passed without a larger step.
	JobProgressing = "Progressing"
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
	// stalls counts the restarts of the whole job after runPolicy.progressDeadlineSeconds ran
	// out: each restarted every replica and counts once in restarts, against backoffLimit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Stalls int32 `json:"stalls,omitempty"`
	// progress is how far training is, as the job's trainers last reported it (docs/progress.md).
	// +optional
	Progress *JobProgress `json:"progress,omitempty"`
	// firstFailure is the replica that failed first, with its node, exit code and last words:
	// the cause of a failed job, where the other replicas exited after it because their peer
	// was gone. Set when the job fails on a replica's exit.
	// +optional
	FirstFailure *ReplicaFailure `json:"firstFailure,omitempty"`
}

// JobProgress is the progress the trainers of a job report, and what the operator makes of it.
type JobProgress struct {
	// step is the last step reported.
	// +kubebuilder:validation:Minimum=0
	Step int64 `json:"step"`
	// totalSteps is the number of steps the run will take, when the trainer said.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalSteps *int64 `json:"totalSteps,omitempty"`
	// epoch is the last epoch reported, when the trainer counts them.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Epoch *int64 `json:"epoch,omitempty"`
	// totalEpochs is the number of epochs the run will take, when the trainer said.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalEpochs *int64 `json:"totalEpochs,omitempty"`
	// percent is how much of the run is done, 0-100: from step and totalSteps, else from epoch
	// and totalEpochs; unset when neither total is known.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent *int32 `json:"percent,omitempty"`
	// metrics are the named values of the last report (loss, accuracy...), in the order the
	// trainer sent them, each written as a decimal number, or NaN, +Inf or -Inf: a run that
	// diverges shows as one.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
	// replica is the pod whose report this is.
	Replica string `json:"replica"`
	// reportTime is when the operator received the report.
	ReportTime metav1.Time `json:"reportTime"`
	// advanceTime is when the step last grew: progressDeadlineSeconds counts from it.
	// +optional
	AdvanceTime *metav1.Time `json:"advanceTime,omitempty"`
	// stepsPerSecond is the recent step rate, as the operator measured it over the last reports.
	// +optional
	StepsPerSecond string `json:"stepsPerSecond,omitempty"`
	// remainingSeconds is the operator's estimate of the time left, from the recent step rate
	// and totalSteps (or the epoch rate and totalEpochs); unset until it can tell.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RemainingSeconds *int64 `json:"remainingSeconds,omitempty"`
	// summary is the progress in a few characters, for `kubectl get`: "42%", or "step 120"
	// when no total is known.
	// +optional
	Summary string `json:"summary,omitempty"`
	// remaining is remainingSeconds for people, e.g. "1h12m", for `kubectl get -o wide`.
	// +optional
	Remaining string `json:"remaining,omitempty"`
}

// Metric is one named value a trainer reported.
type Metric struct {
	// name is the metric's name, e.g. loss.
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// value is the number as a decimal, or NaN, +Inf or -Inf.
	// +kubebuilder:validation:MaxLength=32
	Value string `json:"value"`
}

// ReplicaFailure is one replica's failure, as the kubelet told it.
type ReplicaFailure struct {
	// replica is the replica's type and index, e.g. "worker 1".
	Replica string `json:"replica"`
	// pod is the replica's pod.
	Pod string `json:"pod"`
	// node is the node the pod ran on.
	// +optional
	Node string `json:"node,omitempty"`
	// exitCode is the framework container's, when it terminated.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// reason is the kubelet's, e.g. Error, OOMKilled, Evicted.
	// +optional
	Reason string `json:"reason,omitempty"`
	// judged is how the operator judged the exit, e.g. "permanent: 1-127".
	// +optional
	Judged string `json:"judged,omitempty"`
	// finishedAt is when its container terminated.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// lastWords is the end of what the container printed as it failed (its termination message,
	// which the framework container takes from its log unless its template says otherwise),
	// at most about 1 KiB, cut at a line; it starts with "[...]" when cut.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	LastWords string `json:"lastWords,omitempty"`
}
