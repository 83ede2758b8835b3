// Package tfjob is the TfJob framework on the replica-job engine: TensorFlow's replica types,
// TF_CONFIG, which replica decides success, and TensorBoard.
package tfjob

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// +kubebuilder:rbac:groups=mlkube.io,resources=tfjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=mlkube.io,resources=tfjobs/status,verbs=get;patch
// Owner references with blockOwnerDeletion need this where OwnerReferencesPermissionEnforcement
// is on (OpenShift, hardened clusters):
// +kubebuilder:rbac:groups=mlkube.io,resources=tfjobs/finalizers,verbs=update

// Framework plugs TfJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}
var _ replicajob.Extension = Framework{}

func (Framework) Kind() string          { return "TfJob" }
func (Framework) NewJob() client.Object { return &v1beta1.TfJob{} }
func (Framework) ContainerName() string { return v1beta1.TfContainerName }
func (Framework) RunPolicy(job client.Object) v1beta1.RunPolicy {
	return job.(*v1beta1.TfJob).Spec.RunPolicy
}
func (Framework) Status(job client.Object) *v1beta1.JobStatus {
	return &job.(*v1beta1.TfJob).Status
}

// Replicas lists the replica groups. The apiserver applies the defaults; they are applied again
// here so a job written before a default existed still runs.
func (Framework) Replicas(job client.Object) []replicajob.Replica {
	spec := job.(*v1beta1.TfJob).Spec
	var out []replicajob.Replica
	for i := range spec.ReplicaSpecs {
		rs := &spec.ReplicaSpecs[i]
		r := replicajob.Replica{
			Type:          string(rs.TfReplicaType),
			Replicas:      rs.Replicas,
			Port:          rs.TfPort,
			RestartPolicy: rs.RestartPolicy,
			Template:      &rs.Template,
		}
		if r.Replicas == 0 {
			r.Replicas = 1
		}
		if r.Port == 0 {
			r.Port = v1beta1.DefaultTfPort
		}
		if r.RestartPolicy == "" {
			r.RestartPolicy = v1beta1.RestartPolicyExitCode
		}
		out = append(out, r)
	}
	return out
}

// Decider is the MASTER or CHIEF when there is one, else WORKER: its replica 0 exiting 0 means
// the training is done. Parameter servers never end on their own, so they never decide.
func (Framework) Decider(replicas []replicajob.Replica) string {
	for _, r := range replicas {
		if r.Type == string(v1beta1.TfReplicaMaster) || r.Type == string(v1beta1.TfReplicaChief) {
			return r.Type
		}
	}
	return string(v1beta1.TfReplicaWorker)
}

// Env is TF_CONFIG for the replica.
func (Framework) Env(job client.Object, replicas []replicajob.Replica, typ string, index int) ([]corev1.EnvVar, error) {
	cfg, err := TFConfig(job, replicas, typ, index)
	if err != nil {
		return nil, err
	}
	return []corev1.EnvVar{{Name: "TF_CONFIG", Value: cfg}}, nil
}
