package replicajob

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// plainFramework is a framework with no env, enough for resolve.
type plainFramework struct{ Framework }

func (plainFramework) Env(Cluster, string, int) []corev1.EnvVar { return nil }

// What a job's memory keeps of its checked cluster points into no copy of the job: a
// template there would keep the whole job read for that reconcile alive as long as the job
// lives, a second job cache. Each reconcile gets the templates of the job it read.
func TestResolvedClusterKeepsNoJob(t *testing.T) {
	job := func() *v1beta1.TfJob {
		j := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "u", Generation: 1}}
		for _, typ := range []string{"MASTER", "WORKER"} {
			j.Spec.ReplicaSpecs = append(j.Spec.ReplicaSpecs, v1beta1.TfReplicaSpec{TfReplicaType: v1beta1.TfReplicaType(typ), Replicas: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "trainer"}}}}})
		}
		return j
	}
	e := &Reconciler{Framework: plainFramework{}}
	mem := &memory{}
	for pass, j := range []*v1beta1.TfJob{job(), job()} {
		c, err := e.resolve(context.Background(), j, mem)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		for i, g := range c.Groups {
			if g.Template != &j.Spec.ReplicaSpecs[i].Template {
				t.Errorf("pass %d: group %s has a template not of the job read", pass, g.Type)
			}
		}
		for _, g := range mem.resolved.cluster.Groups {
			if g.Template != nil {
				t.Errorf("pass %d: the remembered group %s keeps a template", pass, g.Type)
			}
		}
	}
}
