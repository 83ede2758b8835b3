package crdvalidate

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The kinds table's Deciders and the CRD's CEL rules say the same thing twice (a marker cannot
// read Go): every job the CRD accepts has a decider, so Kind.Decider never answers "" for a
// stored job. This holds the two together: each decider with every other type is accepted, and
// a job of the other types alone is refused.
func TestTheCRDRequiresADecider(t *testing.T) {
	if err := Load(); err != nil {
		t.Fatal(err)
	}
	for _, k := range v1beta1.Kinds {
		var others []string
		for _, typ := range k.Types {
			if !slices.Contains(k.Deciders, typ) {
				others = append(others, typ)
			}
		}
		for _, d := range k.Deciders {
			if errs := ValidateAll(jobOf(k, append([]string{d}, others...))); len(errs) > 0 {
				t.Errorf("%s of %s and %v refused: %v", k.Name, d, others, errs)
			}
		}
		if len(others) == 0 {
			continue // every type decides: no job lacks a decider
		}
		if errs := ValidateAll(jobOf(k, others)); len(errs) == 0 {
			t.Errorf("%s of %v, none of them a decider (%s), was accepted", k.Name, others, strings.Join(k.Deciders, ", "))
		}
	}
}

// jobOf is a job of kind k with one replica of each of types.
func jobOf(k *v1beta1.Kind, types []string) *unstructured.Unstructured {
	var groups []any
	for _, typ := range types {
		groups = append(groups, map[string]any{
			k.TypeField: typ, "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": k.Container, "image": "mlkube/trainer:dev"},
			}}},
		})
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicaSpecs": groups}}}
	u.SetAPIVersion(v1beta1.GroupVersion.String())
	u.SetKind(k.Name)
	u.SetName("job")
	u.SetNamespace("ns")
	return u
}
