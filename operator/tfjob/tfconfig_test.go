package tfjob_test

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"
)

func TestTFConfig(t *testing.T) {
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"}}
	job.Spec.ReplicaSpecs = []v1beta1.TfReplicaSpec{
		{TfReplicaType: "CHIEF", Replicas: 1, Template: template},
		{TfReplicaType: "WORKER", Replicas: 2, TfPort: 3333, Template: template},
		{TfReplicaType: "PS", Template: template},
		{TfReplicaType: "EVALUATOR", Replicas: 1, Template: template},
	}
	cluster, err := replicajob.Resolve(tfjob.Framework{}, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ   string
		index int
		want  string
	}{
		{"CHIEF", 0, `{"cluster":{"chief":["j-chief-0.j.ns.svc:2222"],"ps":["j-ps-0.j.ns.svc:2222"],"worker":["j-worker-0.j.ns.svc:3333","j-worker-1.j.ns.svc:3333"]},"task":{"type":"chief","index":0},"environment":"cloud"}`},
		{"WORKER", 1, `{"cluster":{"chief":["j-chief-0.j.ns.svc:2222"],"ps":["j-ps-0.j.ns.svc:2222"],"worker":["j-worker-0.j.ns.svc:3333","j-worker-1.j.ns.svc:3333"]},"task":{"type":"worker","index":1},"environment":"cloud"}`},
		// The evaluator is told the cluster but is not part of it.
		{"EVALUATOR", 0, `{"cluster":{"chief":["j-chief-0.j.ns.svc:2222"],"ps":["j-ps-0.j.ns.svc:2222"],"worker":["j-worker-0.j.ns.svc:3333","j-worker-1.j.ns.svc:3333"]},"task":{"type":"evaluator","index":0},"environment":"cloud"}`},
	} {
		got := tfjob.TFConfig(cluster, tc.typ, tc.index)
		if got != tc.want {
			t.Errorf("%s %d:\n got %s\nwant %s", tc.typ, tc.index, got, tc.want)
		}
		var parsed tfjob.Config
		if err := json.Unmarshal([]byte(got), &parsed); err != nil {
			t.Error(err)
		}
	}
}

func TestReplicasApplyDefaults(t *testing.T) {
	job := &v1beta1.TfJob{}
	job.Spec.ReplicaSpecs = []v1beta1.TfReplicaSpec{{TfReplicaType: "WORKER"}}
	r := job.Groups()[0]
	if r.Replicas != 1 || r.Port != 2222 || r.RestartPolicy != v1beta1.RestartPolicyExitCode {
		t.Errorf("defaults %+v", r)
	}
}
