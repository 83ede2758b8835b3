// Package jaxjob is the JAXJob framework on the replica-job engine: JAX's one replica type, the
// jax.distributed env (COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID) and
// worker 0, the coordinator, deciding the job.
package jaxjob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// update: Kueue's integration (--kueue) suspends and resumes jobs and writes admission into their templates.
// +kubebuilder:rbac:groups=mlkube.io,resources=jaxjobs,verbs=get;list;watch;delete;update;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=jaxjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=jaxjobs/finalizers,verbs=update

// Framework plugs JAXJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}

// Kind is JAXJob.
func (Framework) Kind() *v1beta1.Kind { return kind }

// kind is looked up once: the engine asks for it many times a reconcile, and each lookup makes
// a job of every kind to compare types with.
var kind = v1beta1.KindOf(&v1beta1.JAXJob{})

// Env is what Kubeflow's JAXJob sets on every replica, under the same names: where the
// coordinator (worker 0, process 0) listens, how many processes there are and which one this is
// (worker i is process i). A process passes them to jax.distributed.initialize as
// coordinator_address (COORDINATOR_ADDRESS:COORDINATOR_PORT: JAX takes the host and port as one
// string), num_processes (NUM_PROCESSES) and process_id (PROCESS_ID); process 0 starts the
// coordination service on that port and every process, itself included, connects to it.
// PYTHONUNBUFFERED=1 makes Python write each log line at once, as Kubeflow's does.
func (Framework) Env(c replicajob.Cluster, _ string, index int) []corev1.EnvVar {
	workers, _ := c.Group(string(v1beta1.JAXReplicaWorker)) // the CRD requires it
	return []corev1.EnvVar{
		{Name: "COORDINATOR_ADDRESS", Value: workers.Hosts[0]},
		{Name: "COORDINATOR_PORT", Value: fmt.Sprint(workers.Port)},
		{Name: "NUM_PROCESSES", Value: fmt.Sprint(c.Size())},
		{Name: "PROCESS_ID", Value: fmt.Sprint(index)},
		{Name: "PYTHONUNBUFFERED", Value: "1"},
	}
}
