package tfjob_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// TfJob's own tests (its CRD, TF_CONFIG, TensorBoard) run against a real kube-apiserver and
// etcd (internal/jobtest); the engine's behaviour is tested beside it, in operator/replicajob.

var k8s client.Client

func TestMain(m *testing.M) { jobtest.Main(m, func() { k8s = jobtest.Client }) }

func namespace(t *testing.T) string { t.Helper(); return jobtest.Namespace(t) }

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// replicaGroup is a replica group running a trivial tensorflow container.
func replicaGroup(typ v1beta1.TfReplicaType, replicas int32) v1beta1.TfReplicaSpec {
	return v1beta1.TfReplicaSpec{TfReplicaType: typ, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: v1beta1.TfContainerName, Image: "mlkube/trainer:test"}},
	}}}
}

// standardJob is 1 master, 2 workers and 2 parameter servers.
func standardJob(ns, name string) *v1beta1.TfJob {
	return &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
		replicaGroup(v1beta1.TfReplicaMaster, 1), replicaGroup(v1beta1.TfReplicaWorker, 2), replicaGroup(v1beta1.TfReplicaPS, 2),
	}}}
}

func getJob(t *testing.T, ns, name string) *v1beta1.TfJob {
	t.Helper()
	return jobtest.GetJob[v1beta1.TfJob](t, ns, name)
}

// waitJob waits until the job satisfies cond.
func waitJob(t *testing.T, ns, name, what string, cond func(*v1beta1.TfJob) error) *v1beta1.TfJob {
	t.Helper()
	return jobtest.WaitJob[v1beta1.TfJob](t, ns, name, what, cond)
}
