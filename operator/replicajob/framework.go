// Package replicajob is the one reconcile engine behind every job kind mlkube runs. A job is a
// set of replica groups; the engine owns their pods and headless services, restarts replicas by
// exit code, enforces backoff, deadline, TTL and clean-pod policy, aggregates status and records
// events. A framework plugs in only what differs: the env each pod gets and any objects besides
// the replicas that its jobs need; which replica decides success is in the kind's table entry.
package replicajob

import (
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
	// Env is the environment of the training container of replica (typ, index) of c, a job the
	// engine checked against its CRD (cluster.go): a framework trusts it and checks nothing.
	Env(c Cluster, typ string, index int) []corev1.EnvVar
}

// Extension is implemented by frameworks whose jobs need objects besides their replicas
// (TfJob's TensorBoard). The framework only describes them; the engine creates them once, owned
// by the job and labelled as its replicas are, reports what the apiserver refuses, deletes those
// the job no longer asks for, and keeps them after the job ended (extras.go).
type Extension interface {
	// Extras are the objects the job needs besides its replicas, as they should be created;
	// none when it needs none now.
	Extras(job v1beta1.Job) []client.Object
	// ExtraTypes are the kinds Extras makes, so the engine watches and indexes them.
	ExtraTypes() []client.Object
	// ExtrasStatus records in status what the extras the cache shows say (by name).
	ExtrasStatus(job v1beta1.Job, shown map[string]client.Object, status *v1beta1.JobStatus)
	// ExtrasHint is what to do when the apiserver finds an extra object invalid.
	ExtrasHint() string
}

// PodMutator changes a replica pod before it is created (the accelerator config plugs in here).
type PodMutator interface {
	MutatePod(pod *corev1.Pod)
}
