// Package pytorchjob is the PyTorchJob framework on the replica-job engine: PyTorch's replica
// types, the torch.distributed env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, and torchrun's
// PET_* twins), and the master deciding the job.
package pytorchjob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// update: Kueue's integration (--kueue) suspends and resumes jobs and writes admission into their templates.
// +kubebuilder:rbac:groups=mlkube.io,resources=pytorchjobs,verbs=get;list;watch;delete;update;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=pytorchjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=pytorchjobs/finalizers,verbs=update

// Framework plugs PyTorchJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}

// Kind is PyTorchJob.
func (Framework) Kind() *v1beta1.Kind { return kind }

// kind is looked up once: the engine asks for it many times a reconcile, and each lookup makes
// a job of every kind to compare types with.
var kind = v1beta1.KindOf(&v1beta1.PyTorchJob{})

// Env is what torch.distributed's env:// rendezvous reads: where rank 0 listens, how many ranks
// there are and which one this is. The master is rank 0, worker i is rank i+1. torchrun reads
// the same facts as PET_* (one process per pod: PET_NPROC_PER_NODE 1, a node per replica).
func (Framework) Env(c replicajob.Cluster, typ string, index int) []corev1.EnvVar {
	master, _ := c.Group(string(v1beta1.PyTorchReplicaMaster)) // the CRD requires it
	rank := index
	if typ == string(v1beta1.PyTorchReplicaWorker) {
		rank = index + 1
	}
	vars := []struct{ plain, pet, value string }{
		{"MASTER_ADDR", "PET_MASTER_ADDR", master.Hosts[0]},
		{"MASTER_PORT", "PET_MASTER_PORT", fmt.Sprint(master.Port)},
		{"WORLD_SIZE", "PET_NNODES", fmt.Sprint(c.Size())},
		{"RANK", "PET_NODE_RANK", fmt.Sprint(rank)},
	}
	var env []corev1.EnvVar
	for _, v := range vars {
		env = append(env, corev1.EnvVar{Name: v.plain, Value: v.value})
	}
	for _, v := range vars {
		env = append(env, corev1.EnvVar{Name: v.pet, Value: v.value})
	}
	return append(env, corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: "1"})
}
