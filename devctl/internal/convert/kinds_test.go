package convert

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// Every kind has its facts, and they are the kind's: its groups built under the table's keys
// are its groups, the CRD defaults the port to the table's default port, and every type the
// conversion writes itself (a form's default, Kubeflow's mapped, a decider) is one the CRD
// takes.
func TestEveryKindHasFacts(t *testing.T) {
	if len(jobKinds) != len(v1beta1.Kinds) {
		t.Fatalf("%d kinds with facts, %d kinds", len(jobKinds), len(v1beta1.Kinds))
	}
	for _, k := range v1beta1.Kinds {
		if _, ok := table[k.Name]; !ok {
			t.Errorf("convert has no facts for %s: add them to the table in kinds.go (its old forms, who decides, Kubeflow's form)", k.Name)
		}
	}
	for _, k := range jobKinds {
		var types []string
		for _, f := range k.list.forms {
			if f.defaultType != "" {
				types = append(types, f.defaultType)
			}
		}
		if k.kubeflow != nil {
			for _, kt := range k.kubeflow.types {
				types = append(types, kt.typ)
			}
		}
		for _, typ := range append(types, k.Deciders...) {
			tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: k.Container, Image: "x"}}}}
			job, err := k.build(metav1.ObjectMeta{Name: "j"}, []replicaGroup{{typ: typ, replicas: 1, template: tmpl}}, map[string]any{})
			if err != nil {
				t.Fatalf("%s: %v", k.Name, err)
			}
			if err := crdvalidate.Default(job); err != nil {
				t.Fatal(err)
			}
			if g := job.Groups(); len(g) != 1 || g[0].Type != typ || g[0].Replicas != 1 || g[0].Port != k.DefaultPort {
				t.Errorf("%s: groups %+v, want one %s of port %d", k.Name, g, typ, k.DefaultPort)
			}
			for _, e := range crdvalidate.ValidateAll(job) {
				if e.Field == "spec.replicaSpecs[0]."+k.TypeField {
					t.Errorf("%s: %s", k.Name, crdvalidate.Line(e))
				}
			}
		}
		if got := kindOf(k.New()); got != k {
			t.Errorf("kindOf(%s) = %v", k.Name, got)
		}
		// decides restates the table's Deciders in words for a warning: it must name them all.
		for _, d := range k.Deciders {
			if !strings.Contains(strings.ToLower(k.decides), strings.ToLower(d)) {
				t.Errorf("%s: %q does not name the decider %s", k.Name, k.decides, d)
			}
		}
	}
}
