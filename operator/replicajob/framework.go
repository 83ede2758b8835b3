// Package replicajob is the one reconcile engine behind every job kind mlkube runs. A job is a
// set of replica groups; the engine owns their pods and headless services, restarts replicas by
// exit code, enforces backoff, deadline, TTL and clean-pod policy, aggregates status and records
// events. A framework (TfJob, MXJob) plugs in only what differs: its replica types, the env each
// pod gets and which replica decides success.
package replicajob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Replica is one replica group of a job, whatever its kind.
type Replica = v1beta1.ReplicaGroup

// Framework is what a job kind supplies to the engine. What every kind has (its replica
// groups, run policy, status, training container) the engine reads from the job itself
// (v1beta1.Job) and from its entry in v1beta1.Kinds.
type Framework interface {
	// Kind is the job kind this framework runs.
	Kind() *v1beta1.Kind
	// Decider is the replica type whose replica 0 decides that the job succeeded.
	Decider(replicas []Replica) string
	// Env is the environment of the training container of replica (typ, index).
	Env(job v1beta1.Job, replicas []Replica, typ string, index int) ([]corev1.EnvVar, error)
}

// Extension is implemented by frameworks that own more than replica pods and services
// (TfJob's TensorBoard). The engine calls it on every reconcile, also after the job ended.
type Extension interface {
	// ReconcileExtras creates what the job needs besides replicas and records it in status.
	ReconcileExtras(ctx context.Context, c client.Client, job client.Object, status *v1beta1.JobStatus) error
	// ExtraOwnedTypes are the kinds ReconcileExtras creates, so the engine watches them.
	ExtraOwnedTypes() []client.Object
}

// PodMutator changes a replica pod before it is created (the accelerator config plugs in here).
type PodMutator interface {
	MutatePod(pod *corev1.Pod)
}
