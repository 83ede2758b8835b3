// Package pytorchjob is the PyTorchJob framework on the replica-job engine: PyTorch's replica
// types, the torch.distributed env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, and torchrun's
// PET_* twins), and the master deciding the job.
package pytorchjob

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// +kubebuilder:rbac:groups=mlkube.io,resources=pytorchjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=mlkube.io,resources=pytorchjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=pytorchjobs/finalizers,verbs=update

// Framework plugs PyTorchJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}

// Kind is PyTorchJob.
func (Framework) Kind() *v1beta1.Kind { return v1beta1.KindOf(&v1beta1.PyTorchJob{}) }

// Decider is the master: rank 0 ends the training for everyone.
func (Framework) Decider([]replicajob.Replica) string { return string(v1beta1.PyTorchReplicaMaster) }

// Env is what torch.distributed's env:// rendezvous reads: where rank 0 listens, how many ranks
// there are and which one this is. The master is rank 0, worker i is rank i+1. torchrun reads
// the same facts as PET_* (one process per pod: PET_NPROC_PER_NODE 1, a node per replica).
func (Framework) Env(job v1beta1.Job, replicas []replicajob.Replica, typ string, index int) ([]corev1.EnvVar, error) {
	if err := checkReplicas(replicas, typ, index); err != nil {
		return nil, err
	}
	var master replicajob.Replica
	world := int32(0)
	for _, r := range replicas {
		world += r.Replicas
		if r.Type == string(v1beta1.PyTorchReplicaMaster) {
			master = r
		}
	}
	rank := index
	if typ == string(v1beta1.PyTorchReplicaWorker) {
		rank = index + 1
	}
	host := replicajob.Host(job, master.Type, 0, master.Port)
	host = host[:strings.LastIndex(host, ":")]
	vars := []struct{ plain, pet, value string }{
		{"MASTER_ADDR", "PET_MASTER_ADDR", host},
		{"MASTER_PORT", "PET_MASTER_PORT", fmt.Sprint(master.Port)},
		{"WORLD_SIZE", "PET_NNODES", fmt.Sprint(world)},
		{"RANK", "PET_NODE_RANK", fmt.Sprint(rank)},
	}
	var env []corev1.EnvVar
	for _, v := range vars {
		env = append(env, corev1.EnvVar{Name: v.plain, Value: v.value})
	}
	for _, v := range vars {
		env = append(env, corev1.EnvVar{Name: v.pet, Value: v.value})
	}
	return append(env, corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: "1"}), nil
}

// checkReplicas names each replica group field that would make the env wrong, as the CRD
// would, so that a job stored before a rule existed never starts with a wrong RANK.
func checkReplicas(replicas []replicajob.Replica, typ string, index int) error {
	types := []string{string(v1beta1.PyTorchReplicaMaster), string(v1beta1.PyTorchReplicaWorker)}
	first, errs := replicajob.CheckGroups(replicas, types, replicajob.Fields{Type: "pytorchReplicaType", Port: "port"}, typ, index)
	master, ok := first[string(v1beta1.PyTorchReplicaMaster)]
	if !ok {
		errs = append(errs, errors.New("replicaSpecs has no MASTER group: it is rank 0, where every rank meets"))
	} else if n := replicas[master].Replicas; n != 1 {
		errs = append(errs, fmt.Errorf("replicaSpecs[%d].replicas %d: the MASTER group has exactly one replica", master, n))
	}
	return errors.Join(errs...)
}
