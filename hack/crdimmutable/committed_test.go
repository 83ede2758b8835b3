package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// committed are the CRDs `make generate` wrote, one per kind, by the kind's name.
func committed(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, k := range v1beta1.Kinds {
		crd, err := config.CRD(k)
		if err != nil {
			t.Fatal(err)
		}
		out[k.Name] = crd
	}
	return out
}

// Every property of a replica group in the committed CRDs, the pod spec's above all, is either
// compared by a rule with GroupMessage or one of Mutable: a field that a newer Kubernetes adds
// to the pod spec fails this until `make generate` compares it.
func TestEveryPropertyOfAGroupIsComparedOrMutable(t *testing.T) {
	for kind, crd := range committed(t) {
		for _, v := range crd.Spec.Versions {
			items := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicaSpecs"].Items.Schema
			var rules []string
			for _, r := range items.XValidations {
				if r.Message == GroupMessage {
					rules = append(rules, r.Rule)
				}
			}
			all := strings.Join(rules, "\n")
			tmpl := items.Properties["template"]
			sorted := func(s apiextensionsv1.JSONSchemaProps, prefix string) []string {
				var out []string
				for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
					out = append(out, prefix+name)
				}
				return out
			}
			var paths []string
			paths = append(paths, slices.DeleteFunc(sorted(*items, ""), func(p string) bool { return p == "template" })...)
			paths = append(paths, slices.DeleteFunc(sorted(tmpl, "template."), func(p string) bool { return p == "template.metadata" || p == "template.spec" })...)
			paths = append(paths, sorted(tmpl.Properties["metadata"], "template.metadata.")...)
			specProps := sorted(tmpl.Properties["spec"], "template.spec.")
			if len(specProps) < 40 {
				t.Fatalf("%s: only %d properties under template.spec: %v", kind, len(specProps), specProps)
			}
			paths = append(paths, specProps...)
			for _, p := range paths {
				compared := strings.Contains(all, must(same(p)))
				switch mutable := slices.Contains(Mutable, p); {
				case compared && mutable:
					t.Errorf("%s %s: %s is compared, but may change while suspended", kind, v.Name, p)
				case !compared && !mutable:
					t.Errorf("%s %s: %s is neither compared nor mutable: run make generate", kind, v.Name, p)
				}
			}
		}
	}
}

// crdCostLimit is the most all the rules of a CRD may cost together by the apiserver's estimate,
// each times the number of times it can run in one object (StaticEstimatedCRDCostLimit, beside
// CostLimit).
const crdCostLimit = 100_000_000

// The rules that keep replica groups immutable compile as the apiserver compiles a new CRD's, and
// their estimated cost, times the number of times each can run in one object (a group's rule
// once per group, up to replicaSpecs' maxItems), is within the apiserver's limits with Margin to
// spare: each rule within CostLimit/Margin, all of them within half the CRD's limit, leaving the
// other half to the CRD's other rules. The costs are logged (go test -v). The envtest suites
// install the CRDs into a real apiserver, which refuses a CRD beyond either limit.
func TestCostsAreWithinTheAPIServersLimits(t *testing.T) {
	for kind, crd := range committed(t) {
		for _, v := range crd.Spec.Versions {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			list := spec.Properties["replicaSpecs"]
			if list.MaxItems == nil {
				t.Fatalf("%s: replicaSpecs has no maxItems: each group rule's cost would count once per group a 3 MB request can hold", kind)
			}
			nodes := []struct {
				what        string
				schema      *apiextensionsv1.JSONSchemaProps
				cardinality uint64
			}{
				{"spec", &spec, 1},
				{"spec.replicaSpecs", &list, 1},
				{"spec.replicaSpecs.items", list.Items.Schema, uint64(*list.MaxItems)},
			}
			var total uint64
			for _, n := range nodes {
				est, err := newEstimator(n.schema)
				if err != nil {
					t.Fatal(err)
				}
				for _, rule := range n.schema.XValidations {
					if !strings.Contains(rule.Rule, "oldSelf") {
						continue
					}
					c, err := est.cost(rule.Rule)
					if err != nil {
						t.Fatal(err)
					}
					cost := c * n.cardinality
					total += cost
					t.Logf("%s %s, a rule of %d characters: estimated cost %d x %d = %d", kind, n.what, len(rule.Rule), c, n.cardinality, cost)
					if cost > CostLimit/Margin {
						t.Errorf("%s %s: rule %.60q... costs %d, more than the apiserver's limit %d over Margin", kind, n.what, rule.Rule, cost, CostLimit)
					}
				}
			}
			t.Logf("%s: the immutability rules' estimated cost %d, %.1f%% of the CRD's limit %d", kind, total,
				100*float64(total)/crdCostLimit, crdCostLimit)
			if total > crdCostLimit/2 {
				t.Errorf("%s: the immutability rules cost %d, more than half the CRD's limit", kind, total)
			}
		}
	}
}
