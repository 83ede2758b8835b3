package replicajob_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The apiserver ignores `format: int32`: only the CRD's bounds (hack/crdbounds) keep a number
// its Go type cannot hold out of the store, where it would fail every client's list of the kind.
// So each job the CRD accepts is tried once more with one integer, ours or a pod template's, at
// its bounds (accepted, and it decodes) or beyond them (refused, naming the field).

// integerSite is an integer of a job and values to try it with.
type integerSite struct {
	field  string          // its name, as the apiserver's refusal says it
	at     []any           // where it is in the manifest: keys, list indexes, portField
	wrap   func(n any) any // what to set there around the number; nil sets the number
	beyond []any           // values the CRD must refuse: past the Go type, or past the meaning
	within []any           // values at the bounds, which the CRD must accept
}

// portField stands for the kind's port field (v1beta1.Kind.PortField) in a path.
const portField = "<port field>"

// big is a number beyond int64, sent as written: the apiserver reads it as a float64.
func big(n string) json.Number { return json.Number(n) }

func group(p ...any) []any     { return append([]any{"spec", "replicaSpecs", 0}, p...) }
func podSpec(p ...any) []any   { return group(append([]any{"template", "spec"}, p...)...) }
func container(p ...any) []any { return podSpec(append([]any{"containers", 0}, p...)...) }

var integerSites = []integerSite{
	{field: "ttlSecondsAfterFinished", at: []any{"spec", "runPolicy", "ttlSecondsAfterFinished"},
		beyond: []any{int64(-1), int64(2147483648), int64(2592000000)}, within: []any{int64(0), int64(2147483647)}},
	{field: "backoffLimit", at: []any{"spec", "runPolicy", "backoffLimit"},
		beyond: []any{int64(-1), int64(4294967296)}, within: []any{int64(0), int64(2147483647)}},
	// At most the longest time.Duration in seconds: a deadline past it wraps around.
	{field: "activeDeadlineSeconds", at: []any{"spec", "runPolicy", "activeDeadlineSeconds"},
		beyond: []any{int64(0), int64(9223372037), big("9223372036854775808")}, within: []any{int64(1), int64(9223372036)}},
	{field: "replicas", at: group("replicas"),
		beyond: []any{int64(0), int64(10001), int64(4294967297)}, within: []any{int64(1)}},
	{field: portField, at: group(portField),
		beyond: []any{int64(0), int64(65536), int64(3000000000)}, within: []any{int64(1), int64(65535)}},
	{field: "containerPort", at: container("ports"), wrap: func(n any) any { return []any{map[string]any{"containerPort": n}} },
		beyond: []any{int64(3000000000), int64(-2147483649)}, within: []any{int64(2147483647), int64(-2147483648)}},
	{field: "port", at: container("livenessProbe"), wrap: func(n any) any { return map[string]any{"httpGet": map[string]any{"port": n}} },
		beyond: []any{int64(3000000000), int64(-2147483649)}, within: []any{int64(2147483647), "http"}},
	{field: "periodSeconds", at: container("readinessProbe"),
		wrap: func(n any) any {
			return map[string]any{"exec": map[string]any{"command": []any{"true"}}, "periodSeconds": n}
		},
		beyond: []any{int64(2147483648)}, within: []any{int64(2147483647)}},
	{field: "maxSkew", at: podSpec("topologySpreadConstraints"),
		wrap: func(n any) any {
			return []any{map[string]any{"maxSkew": n, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}}
		},
		beyond: []any{int64(2147483648), int64(-2147483649)}, within: []any{int64(2147483647)}},
	{field: "terminationGracePeriodSeconds", at: podSpec("terminationGracePeriodSeconds"),
		beyond: []any{big("9223372036854775808"), big("-9223372036854775809")}, within: []any{int64(9223372036854774784), int64(-9223372036854774784)}},
	{field: "runAsUser", at: podSpec("securityContext"), wrap: func(n any) any { return map[string]any{"runAsUser": n} },
		beyond: []any{big("18446744073709551616"), big("1e19")}, within: []any{int64(-9223372036854774784)}},
}

// tryEdge tries manifest, a job of kind k the CRD accepts, with one integer at or beyond its
// bounds. It says which integer it tried and how the CRD must answer: "accepted" or "refused".
func tryEdge(t *testing.T, rng *rand.Rand, k *v1beta1.Kind, manifest map[string]any) (site integerSite, answer string) {
	t.Helper()
	site = pick(rng, integerSites...)
	beyond := rng.IntN(3) > 0
	n := pick(rng, site.within...)
	if beyond {
		n = pick(rng, site.beyond...)
	}
	var v any = n
	if site.wrap != nil {
		v = site.wrap(n)
	}
	variant := runtime.DeepCopyJSON(manifest)
	setAt(variant, site.at, k, v)
	field := strings.ReplaceAll(site.field, portField, k.PortField)
	_, refusal := dryRun(t, k, variant)
	name := variant["metadata"].(map[string]any)["name"]
	switch {
	case beyond && (refusal == nil || !strings.Contains(refusal.Error(), field)):
		t.Errorf("%s %s with %s %v: %v; want it refused, naming %s", k.Name, name, field, n, refusal, field)
	case !beyond && refusal != nil:
		t.Errorf("%s %s with %s %v, within its bounds, is refused: %v", k.Name, name, field, n, refusal)
	}
	if beyond {
		return site, "refused"
	}
	return site, "accepted"
}

// setAt sets v at path in obj, making the maps on the way.
func setAt(obj map[string]any, path []any, k *v1beta1.Kind, v any) {
	var at any = obj
	for i, step := range path {
		if step == portField {
			step = k.PortField
		}
		last := i == len(path)-1
		switch step := step.(type) {
		case string:
			m := at.(map[string]any)
			if last {
				m[step] = v
			} else if _, ok := m[step]; !ok {
				m[step] = map[string]any{}
			}
			at = m[step]
		case int:
			at = at.([]any)[step]
		default:
			panic(fmt.Sprintf("path step %v", step))
		}
	}
}
