// Package tfjob is the TfJob framework on the replica-job engine: TensorFlow's replica types,
// TF_CONFIG, which replica decides success, and TensorBoard.
package tfjob

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// update: Kueue's integration (--kueue) suspends and resumes jobs and writes admission into their templates.
// +kubebuilder:rbac:groups=mlkube.io,resources=tfjobs,verbs=get;list;watch;delete;update;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=tfjobs/status,verbs=get;patch
// Owner references with blockOwnerDeletion need this where OwnerReferencesPermissionEnforcement
// is on (OpenShift, hardened clusters):
// +kubebuilder:rbac:groups=mlkube.io,resources=tfjobs/finalizers,verbs=update

// Framework plugs TfJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}
var _ replicajob.Extension = Framework{}

// Kind is TfJob.
func (Framework) Kind() *v1beta1.Kind { return kind }

// kind is looked up once: the engine asks for it many times a reconcile, and each lookup makes
// a job of every kind to compare types with.
var kind = v1beta1.KindOf(&v1beta1.TfJob{})

// Env is TF_CONFIG for the replica.
func (Framework) Env(c replicajob.Cluster, typ string, index int) []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "TF_CONFIG", Value: TFConfig(c, typ, index)}}
}
