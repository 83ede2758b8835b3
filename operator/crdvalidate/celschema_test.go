package crdvalidate

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/runtime"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// The CEL rules run against the schema cut to the fields they name (celschema.go) say what they
// say against the whole schema, for a valid job and for jobs that break each rule of the
// TfJob's CRD; and the cut is a cut: a template's spec keeps a handful of its forty fields.
func TestCELRulesSeeTheSameAsAgainstTheWholeSchema(t *testing.T) {
	k := v1beta1.KindOf(&v1beta1.TfJob{})
	c, err := crdOf(k)
	if err != nil {
		t.Fatal(err)
	}
	def, err := config.CRD(k)
	if err != nil {
		t.Fatal(err)
	}
	whole := cel.NewValidator(c.structural, true, celconfig.PerCallLimit)
	cut := cel.NewValidator(celSchema(c.structural, def.Spec.Versions[0].Schema.OpenAPIV3Schema), true, celconfig.PerCallLimit)

	full := c.structural.Properties["spec"].Properties["replicaSpecs"].Items.Properties["template"].Properties["spec"]
	small := celSchema(c.structural, def.Spec.Versions[0].Schema.OpenAPIV3Schema).Properties["spec"].Properties["replicaSpecs"].Items.Properties["template"].Properties["spec"]
	if len(small.Properties) >= len(full.Properties)/2 {
		t.Errorf("the template's spec keeps %d of its %d fields for the CEL rules", len(small.Properties), len(full.Properties))
	}
	if len(full.Properties) != 0 && len(c.structural.Properties["spec"].Properties["replicaSpecs"].Items.Properties["template"].Properties["spec"].Properties) != len(full.Properties) {
		t.Error("celSchema changed the schema it was given")
	}

	jobs := map[string]func(j *v1beta1.TfJob){
		"valid":     func(*v1beta1.TfJob) {},
		"bad name":  func(j *v1beta1.TfJob) { j.Name = "9job" },
		"long name": func(j *v1beta1.TfJob) { j.Name = "j123456789012345678901234567890123456789012345678901234567890" },
		"two masters": func(j *v1beta1.TfJob) {
			j.Spec.ReplicaSpecs[1].TfReplicaType = "CHIEF"
			j.Spec.ReplicaSpecs[1].Replicas = 1
		},
		"master of two": func(j *v1beta1.TfJob) { j.Spec.ReplicaSpecs[0].Replicas = 2 },
		"no decider":    func(j *v1beta1.TfJob) { j.Spec.ReplicaSpecs = j.Spec.ReplicaSpecs[2:] },
		"no tensorflow": func(j *v1beta1.TfJob) { j.Spec.ReplicaSpecs[1].Template.Spec.Containers[0].Name = "trainer" },
		"hostname":      func(j *v1beta1.TfJob) { j.Spec.ReplicaSpecs[0].Template.Spec.Hostname = "h" },
		"subdomain":     func(j *v1beta1.TfJob) { j.Spec.ReplicaSpecs[0].Template.Spec.Subdomain = "s" },
		"fields no rule read": func(j *v1beta1.TfJob) {
			j.Spec.ReplicaSpecs[0].Template.Spec.NodeName = "n"
			j.Spec.ReplicaSpecs[0].Template.Labels = map[string]string{"a": "b"}
		},
	}
	for name, change := range jobs {
		j := tfJob()
		change(j)
		_, u, err := prepare(runtime.Object(j))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := whole.Validate(context.Background(), nil, c.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
		got, _ := cut.Validate(context.Background(), nil, c.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: against the cut schema\n%v\nagainst the whole\n%v", name, got, want)
		}
		if name != "valid" && name != "fields no rule read" && len(want) == 0 {
			t.Errorf("%s: no rule refuses it; the case tests nothing", name)
		}
	}
}
