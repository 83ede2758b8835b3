package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
)

// crd is a CRD whose replica groups have the given schema, as controller-gen writes it.
func crd(list, item string) []byte {
	return crdfile.Sample("replicaSpecs:\n" + crdfile.Indent(strings.TrimSpace(list)+"\nitems:\n"+crdfile.Indent(item, "  "), "  "))
}

const listMap = `
maxItems: 2
type: array
x-kubernetes-list-map-keys:
- probeType
x-kubernetes-list-type: map
`

// group is a replica group's schema with every property a rule must sort: its own fields, a
// template whose metadata and spec hold mutable and immutable ones (namespace, which CEL
// spells __namespace__, among them), and a rule of its own.
const group = `
properties:
  probeType:
    type: string
  replicas:
    format: int32
    type: integer
  template:
    properties:
      metadata:
        properties:
          annotations:
            additionalProperties:
              type: string
            type: object
          labels:
            additionalProperties:
              type: string
            type: object
          name:
            type: string
          namespace:
            type: string
        type: object
      spec:
        properties:
          containers:
            items:
              properties:
                image:
                  type: string
              type: object
            type: array
          futureField:
            type: string
          nodeSelector:
            additionalProperties:
              type: string
            type: object
          schedulingGates:
            items:
              type: object
            type: array
          tolerations:
            items:
              type: object
            type: array
          volumes:
            items:
              type: object
            type: array
        type: object
    type: object
required:
- probeType
- template
type: object
x-kubernetes-validations:
- message: replicas stay small
  rule: self.replicas < 10
`

// listOf is the replicaSpecs schema of a manifest.
func listOf(t *testing.T, manifest []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	root := m["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	s, err := crdfile.Child(root, "spec", "replicaSpecs")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rulesOf are the rules of a schema, as "message: rule".
func rulesOf(s map[string]any) []string {
	var out []string
	rules, _ := s["x-kubernetes-validations"].([]any)
	for _, r := range rules {
		r := r.(map[string]any)
		out = append(out, fmt.Sprintf("%v: %v", r["message"], r["rule"]))
	}
	return out
}

func TestComparesEveryPropertyButTheMutableOnes(t *testing.T) {
	out, r, err := immutableCRD(crd(listMap, group))
	if err != nil {
		t.Fatal(err)
	}
	list := listOf(t, out)
	if got, want := rulesOf(list), []string{GroupsMessage + ": self.size() == oldSelf.size() && self.all(g, oldSelf.exists(o, o.probeType == g.probeType))"}; !slices.Equal(got, want) {
		t.Errorf("the list's rules\n%q\nwant\n%q", got, want)
	}
	want := []string{
		"replicas stay small: self.replicas < 10",
		GroupMessage + ": self == oldSelf || (" + strings.Join([]string{
			must(same("probeType")),
			must(same("replicas")),
			must(same("template.metadata.name")),
			"(self.?template.?metadata.?__namespace__.hasValue() ? oldSelf.?template.?metadata.?__namespace__.hasValue() && " +
				"self.template.metadata.__namespace__ == oldSelf.template.metadata.__namespace__ : !oldSelf.?template.?metadata.?__namespace__.hasValue())",
			must(same("template.spec.containers")),
			must(same("template.spec.futureField")),
			must(same("template.spec.volumes")),
		}, "\n&& ") + ")",
	}
	if got := rulesOf(list["items"].(map[string]any)); !slices.Equal(got, want) {
		t.Errorf("the items' rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(r.mutable, []string{"template.metadata.annotations", "template.metadata.labels",
		"template.spec.nodeSelector", "template.spec.schedulingGates", "template.spec.tolerations"}) {
		t.Errorf("mutable %v", r.mutable)
	}
	again, _, err := immutableCRD(out)
	if err != nil || string(again) != string(out) {
		t.Errorf("a second run changes its own output (err %v):\n%s", err, again)
	}
}

// A string without a maxLength costs about 314,000 to compare by the apiserver's estimate. With
// 8 groups a rule may cost 10,000,000 / 8 / Margin = 625,000: at most one such string a rule.
func TestSplitsTheComparisonsToStayWithinTheCostLimit(t *testing.T) {
	out, r, err := immutableCRD(crd(strings.Replace(listMap, "maxItems: 2", "maxItems: 8", 1), group))
	if err != nil {
		t.Fatal(err)
	}
	rules := rulesOf(listOf(t, out)["items"].(map[string]any))[1:]
	if len(rules) != 4 || len(r.rules) != 4 || len(r.compared) != 7 || r.budget != 625_000 {
		t.Fatalf("%d rules for %d properties within %d, want 4 within 625000:\n%s", len(rules), len(r.compared), r.budget, strings.Join(rules, "\n"))
	}
	all := strings.Join(rules, "\n")
	for i, rule := range rules {
		if !strings.HasPrefix(rule, GroupMessage+": ") || r.costs[i] > r.budget {
			t.Errorf("rule %q costs %d", rule, r.costs[i])
		}
	}
	for _, p := range r.compared {
		if n := strings.Count(all, must(same(p))); n != 1 {
			t.Errorf("%s compared %d times, want once", p, n)
		}
	}
}

func TestRefusesASchemaItCannotCover(t *testing.T) {
	for what, tc := range map[string]struct{ list, item, want string }{
		"a list of another type": {strings.Replace(listMap, "type: map", "type: atomic", 1), group, "no list of type map"},
		"no maxItems":            {strings.Replace(listMap, "maxItems: 2\n", "", 1), group, "has no maxItems"},
		"too many groups":        {strings.Replace(listMap, "maxItems: 2", "maxItems: 20", 1), group, "comparing probeType alone costs"},
		"no schedulingGates":     {listMap, strings.Replace(group, "schedulingGates:", "schedulingGroup:", 1), "has no template.spec.schedulingGates"},
		"an open template.spec": {listMap, strings.Replace(group, "        type: object\n    type: object\nrequired:", "        type: object\n        x-kubernetes-preserve-unknown-fields: true\n    type: object\nrequired:", 1),
			"template.spec holds a mutable property but keeps fields"},
	} {
		if _, _, err := immutableCRD(crd(tc.list, tc.item)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", what, err, tc.want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
