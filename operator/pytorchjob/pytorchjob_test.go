package pytorchjob_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/pytorchjob"
	"github.com/mlkube/mlkube/operator/replicajob"
)

func TestMain(m *testing.M) { jobtest.Main(m, nil) }

func group(typ v1beta1.PyTorchReplicaType, replicas int32) v1beta1.PyTorchReplicaSpec {
	return v1beta1.PyTorchReplicaSpec{
		PyTorchReplicaType: typ,
		Replicas:           replicas,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pytorch", Image: "mlkube/trainer:test"}},
		}},
	}
}

func newJob(ns, name string, groups ...v1beta1.PyTorchReplicaSpec) *v1beta1.PyTorchJob {
	return &v1beta1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1beta1.PyTorchJobSpec{ReplicaSpecs: groups}}
}

func TestEnv(t *testing.T) {
	job := newJob("ns", "pt", group(v1beta1.PyTorchReplicaMaster, 1), group(v1beta1.PyTorchReplicaWorker, 3))
	job.Spec.ReplicaSpecs[0].Port = 29500
	fw := pytorchjob.Framework{}
	cluster, err := replicajob.Resolve(fw, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ   string
		index int
		want  string
	}{
		{"MASTER", 0, "MASTER_ADDR=pt-master-0.ns.svc MASTER_PORT=29500 WORLD_SIZE=4 RANK=0"},
		{"WORKER", 2, "MASTER_ADDR=pt-master-0.ns.svc MASTER_PORT=29500 WORLD_SIZE=4 RANK=3"},
	} {
		vars := fw.Env(cluster, tc.typ, tc.index)
		var got []string
		for _, v := range vars[:4] {
			got = append(got, v.Name+"="+v.Value)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s %d: env\n got %s\nwant %s", tc.typ, tc.index, strings.Join(got, " "), tc.want)
		}
		for _, v := range vars[4:] {
			if !strings.HasPrefix(v.Name, "PET_") {
				t.Errorf("%s %d: unexpected %s", tc.typ, tc.index, v.Name)
			}
		}
	}
	if fw.Decider(job.Groups()) != "MASTER" {
		t.Error("the master must decide")
	}
	// A job stored before the CRD's rules existed is checked by them before any env is built.
	if _, err := replicajob.Resolve(fw, newJob("ns", "pt", group(v1beta1.PyTorchReplicaWorker, 2))); err == nil || !strings.Contains(err.Error(), "replicaSpecs needs a MASTER group") {
		t.Errorf("a job without a MASTER resolved: %v", err)
	}
}

func TestInvalidPyTorchJobsAreRefused(t *testing.T) {
	ns := jobtest.Namespace(t)
	noPyTorch := group(v1beta1.PyTorchReplicaWorker, 1)
	noPyTorch.Template.Spec.Containers[0].Name = "main"
	for _, tc := range []struct {
		name string
		job  *v1beta1.PyTorchJob
		want string
	}{
		{"no-master", newJob(ns, "a", group(v1beta1.PyTorchReplicaWorker, 2)), "replicaSpecs needs a MASTER group"},
		{"two-masters", newJob(ns, "b", group(v1beta1.PyTorchReplicaMaster, 2)), "the MASTER group has exactly one replica"},
		{"no-pytorch-container", newJob(ns, "c", group(v1beta1.PyTorchReplicaMaster, 1), noPyTorch), "needs a container named 'pytorch'"},
		{"unknown-type", newJob(ns, "d", group(v1beta1.PyTorchReplicaMaster, 1), group("PS", 1)), `Unsupported value: "PS"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := jobtest.Client.Create(context.Background(), tc.job)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create: %v, want Invalid containing %q", err, tc.want)
			}
		})
	}
	job := newJob(ns, "immutable", group(v1beta1.PyTorchReplicaMaster, 1), group(v1beta1.PyTorchReplicaWorker, 1))
	jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
	job.Spec.ReplicaSpecs[1].Replicas = 4
	if err := jobtest.Client.Update(context.Background(), job); err == nil || !strings.Contains(err.Error(), "replicaSpecs cannot change once the job exists") {
		t.Errorf("changing replicas: %v", err)
	}
}
