// Package mxjob is the MXJob framework on the replica-job engine: MXNet's replica types, the
// DMLC_* env that points every replica at the scheduler, and the scheduler deciding the job.
package mxjob

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// update: Kueue's integration (--kueue) suspends and resumes jobs and writes admission into their templates.
// +kubebuilder:rbac:groups=mlkube.io,resources=mxjobs,verbs=get;list;watch;delete;update;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=mxjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=mxjobs/finalizers,verbs=update

// Framework plugs MXJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}

// Kind is MXJob.
func (Framework) Kind() *v1beta1.Kind { return kind }

// kind is looked up once: the engine asks for it many times a reconcile, and each lookup makes
// a job of every kind to compare types with.
var kind = v1beta1.KindOf(&v1beta1.MXJob{})

// Env is what MXNet's parameter-server runtime (ps-lite) reads to join the cluster: the
// replica's role, where the scheduler is, and how many servers and workers to wait for.
func (Framework) Env(c replicajob.Cluster, typ string, index int) []corev1.EnvVar {
	scheduler, _ := c.Group(string(v1beta1.MXReplicaScheduler)) // the CRD requires it
	servers, _ := c.Group(string(v1beta1.MXReplicaServer))
	workers, _ := c.Group(string(v1beta1.MXReplicaWorker))
	return []corev1.EnvVar{
		{Name: "DMLC_ROLE", Value: strings.ToLower(typ)},
		{Name: "DMLC_PS_ROOT_URI", Value: scheduler.Hosts[0]},
		{Name: "DMLC_PS_ROOT_PORT", Value: fmt.Sprint(scheduler.Port)},
		{Name: "DMLC_NUM_SERVER", Value: fmt.Sprint(len(servers.Hosts))},
		{Name: "DMLC_NUM_WORKER", Value: fmt.Sprint(len(workers.Hosts))},
	}
}
