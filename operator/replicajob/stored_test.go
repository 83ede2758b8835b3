package replicajob_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// The property: whatever job of any kind the apiserver stores, the operator neither crashes,
// nor stops reconciling the other jobs, nor writes a status the CRD refuses. Jobs are made from
// a valid one of each kind by setting random fields, anywhere in the spec (pod templates
// included), to random values of the types the CRD's own schema gives them: its extremes, zero,
// empty and odd strings, random members. The apiserver is the gate: what it refuses is not
// stored and not counted. Once every stored job has been looked at, a job of each kind created
// after them must still get its pods.
func TestWhateverIsStoredTheOperatorServesTheRest(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	addr := freeAddr(t)
	startOperator(t, ns, func(o *operator.Options) { o.MetricsBindAddress = addr })
	var before string
	eventually(t, "the metrics endpoint", func() (err error) {
		before, err = scrape("http://" + addr + "/metrics")
		return err
	})

	rng := rand.New(rand.NewPCG(24, 5))
	stored := map[string]int{}
	var names []string
	for _, k := range v1beta1.Kinds {
		schema := specSchema(t, k)
		kit := jobtest.KindOf(frameworkOf(t, k))
		for i := 0; i < 120 && stored[k.Name] < 20; i++ {
			name := fmt.Sprintf("r%d-%s", i, k.Label())
			u := toUnstructured(t, kit.NewJob(ns, name, v1beta1.RunPolicy{}))
			spec := u.Object["spec"].(map[string]any)
			for range 1 + rng.IntN(3) {
				mutate(rng, spec, schema, "spec")
			}
			if err := k8s.Create(ctx, u); err != nil {
				if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
					t.Fatalf("storing %s: %v", name, err)
				}
				continue
			}
			stored[k.Name]++
			names = append(names, k.Name+"/"+name)
		}
		if stored[k.Name] < 10 {
			t.Errorf("%s: only %d random jobs stored; the generator makes too few that the CRD accepts", k.Name, stored[k.Name])
		}
	}

	// Every stored job is looked at: it has a status (or was deleted by its own TTL).
	eventually(t, "a status on every stored job", func() error {
		for _, n := range names {
			kindName, name, _ := strings.Cut(n, "/")
			job := v1beta1.KindNamed(kindName).New()
			err := k8s.Get(ctx, keyOf(ns, name), job)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			if job.JobStatus().ObservedGeneration == 0 {
				return errorf("%s has no status yet", n)
			}
		}
		return nil
	})
	var want []string
	for _, k := range v1beta1.Kinds {
		kit := jobtest.KindOf(frameworkOf(t, k))
		must(t, k8s.Create(ctx, kit.NewJob(ns, "after-"+k.Label(), v1beta1.RunPolicy{})))
		want = append(want, podsOf(kit, "after-"+k.Label())...)
	}
	eventually(t, "the pods of the jobs created after the random ones", func() error {
		pods := listPods(t, ns)
		for _, n := range want {
			if _, ok := pods[n]; !ok {
				return errorf("pod %s missing", n)
			}
		}
		return nil
	})

	after, err := scrape("http://" + addr + "/metrics")
	must(t, err)
	for _, k := range v1beta1.Kinds {
		for _, reason := range []string{"Invalid", "BadRequest"} {
			labels := map[string]string{"kind": k.Name, "reason": reason}
			was, _ := sample(before, "mlkube_reconcile_errors_total", labels)
			now, _ := sample(after, "mlkube_reconcile_errors_total", labels)
			if now > was {
				t.Errorf("%s: %v status or object writes the apiserver refused as %s", k.Name, now-was, reason)
			}
		}
		labels := map[string]string{"controller": k.Label()}
		was, _ := sample(before, "controller_runtime_reconcile_panics_total", labels)
		now, _ := sample(after, "controller_runtime_reconcile_panics_total", labels)
		if now > was {
			t.Errorf("%s: the reconciler panicked %v times", k.Name, now-was)
		}
	}
	t.Logf("stored %v random jobs", stored)
}

// specSchema is the schema of the spec of kind k, from its CRD as generated.
func specSchema(t *testing.T, k *v1beta1.Kind) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	crd, err := config.CRD(k)
	must(t, err)
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	return &spec
}

// mutate sets one random field under v (of schema s, at path) to a random value of its type.
// Replica counts stay small: a job of thousands of pods costs the test minutes, and the engine's
// handling of counts is the fuzzers' (jobtest.FuzzReplicas).
func mutate(rng *rand.Rand, v map[string]any, s *apiextensionsv1.JSONSchemaProps, path string) {
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	key := keys[rng.IntN(len(keys))]
	ps := s.Properties[key]
	child := path + "." + key
	switch cur := v[key].(type) {
	case map[string]any:
		if rng.IntN(4) > 0 && len(ps.Properties) > 0 {
			mutate(rng, cur, &ps, child)
			return
		}
	case []any:
		if len(cur) > 0 && ps.Items != nil && ps.Items.Schema != nil && rng.IntN(4) > 0 {
			if item, ok := cur[rng.IntN(len(cur))].(map[string]any); ok {
				mutate(rng, item, ps.Items.Schema, child)
				return
			}
		}
	}
	if key == "replicas" {
		v[key] = int64(1 + rng.IntN(3))
		return
	}
	v[key] = randomValue(rng, &ps, 0)
}

// randomValue is a value of schema s's type, chosen to find edges: a bound, zero, an enum's
// member, an empty or odd string, a short list, a few of an object's fields.
func randomValue(rng *rand.Rand, s *apiextensionsv1.JSONSchemaProps, depth int) any {
	if len(s.Enum) > 0 {
		var v any
		_ = yaml.Unmarshal(s.Enum[rng.IntN(len(s.Enum))].Raw, &v)
		return v
	}
	if s.XIntOrString && rng.IntN(2) == 0 {
		return []any{int64(0), int64(80), "http", "50%", ""}[rng.IntN(5)]
	}
	switch s.Type {
	case "integer":
		choices := []int64{0, 1, -1, 65535, 1 << 31, -(1 << 31), 1<<31 - 1, rng.Int64N(1 << 20)}
		if s.Minimum != nil {
			choices = append(choices, int64(*s.Minimum))
		}
		if s.Maximum != nil {
			choices = append(choices, int64(*s.Maximum))
		}
		return choices[rng.IntN(len(choices))]
	case "number":
		return []float64{0, 0.5, -1, 1e9}[rng.IntN(4)]
	case "boolean":
		return rng.IntN(2) == 0
	case "string":
		return []string{"", "a", "x-1", "Ünïcødé", strings.Repeat("long", 70), "1Gi", "0.5", "2026-11-26T00:00:00Z", "tensorflow"}[rng.IntN(9)]
	case "array":
		if s.Items == nil || s.Items.Schema == nil || depth > 3 {
			return []any{}
		}
		out := []any{}
		for range rng.IntN(3) {
			out = append(out, randomValue(rng, s.Items.Schema, depth+1))
		}
		return out
	case "object":
		out := map[string]any{}
		if depth > 3 {
			return out
		}
		for k, p := range s.Properties {
			if rng.IntN(3) == 0 {
				out[k] = randomValue(rng, &p, depth+1)
			}
		}
		if len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && rng.IntN(2) == 0 {
			out["k"] = randomValue(rng, s.AdditionalProperties.Schema, depth+1)
		}
		return out
	}
	return nil
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
