package crdvalidate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What Validate says is what the apiserver says: for jobs of every kind generated at random from
// a fixed seed, valid and not (names, replica types, counts, ports, restart policies, containers
// and images, run policies), a server-side dry run of the create and Validate refuse the same
// jobs with the same causes, in the same order: the same fields, the same types, the same
// messages. It skips when the control-plane binaries are not built, except under `make test`.
func TestSameAsTheAPIServer(t *testing.T) {
	cfg := controlplane.ForTest(t)
	k8s, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": DefaultNamespace},
	}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(15, 26))
	refused := map[string]int{}
	for i := range 360 {
		k := v1beta1.Kinds[i%len(v1beta1.Kinds)]
		u := randomJob(t, rng, k)
		got := Validate(u.DeepCopy())
		sent := u.DeepCopy()
		sent.SetNamespace(DefaultNamespace) // the request's; Validate assumes it
		err := k8s.Create(ctx, sent, client.DryRunAll)
		want, ok := causes(err)
		if !ok {
			t.Fatalf("job %d: dry run: %v", i, err)
		}
		if len(want) > 0 {
			refused[k.Name]++
		}
		if mine := asCauses(got); !reflect.DeepEqual(sorted(mine), sorted(normalized(want))) {
			y, _ := u.MarshalJSON()
			t.Errorf("job %d, %s:\n%s\nthe apiserver says:\n%s\nValidate says:\n%s", i, k.Name, y, causeLines(want), causeLines(mine))
		}
	}
	for _, k := range v1beta1.Kinds {
		if n, of := refused[k.Name], 360/len(v1beta1.Kinds); n < of/7 || n > of-of/7 {
			t.Errorf("%s: %d of %d jobs refused: the generator should make many of both", k.Name, n, of)
		}
	}
	t.Logf("refused: %v", refused)
}

// causes are the apiserver's causes of an Invalid refusal; none for a create it accepts.
func causes(err error) ([]metav1.StatusCause, bool) {
	if err == nil {
		return nil, true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil, false
	}
	return status.Status().Details.Causes, true
}

var schemaGK = schema.GroupKind{Group: v1beta1.GroupVersion.Group, Kind: "Job"}

// normalized drops from causes what the apiserver of Kubernetes 1.34, which the tests run, says
// and the 1.37 libraries do not: CEL rules' placeholder values ("object", "array").
func normalized(cs []metav1.StatusCause) []metav1.StatusCause {
	out := slices.Clone(cs)
	for i := range out {
		for _, v := range []string{`"object"`, `"array"`} {
			out[i].Message = strings.Replace(out[i].Message, "Invalid value: "+v+": ", "Invalid value: ", 1)
		}
	}
	return out
}

// sorted are causes in one order: the apiserver's schema validator gives them in map order.
func sorted(cs []metav1.StatusCause) []metav1.StatusCause {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b metav1.StatusCause) int {
		return strings.Compare(a.Field+"\x00"+a.Message, b.Field+"\x00"+b.Message)
	})
	return out
}

// asCauses are the causes the apiserver makes of errs (apierrors.NewInvalid).
func asCauses(errs []*field.Error) []metav1.StatusCause {
	if len(errs) == 0 {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(apierrors.NewInvalid(schemaGK, "x", errs), &status) {
		return nil
	}
	return status.Status().Details.Causes
}

func causeLines(cs []metav1.StatusCause) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s | %s | %s\n", c.Field, c.Type, c.Message)
	}
	return b.String()
}

// randomJob is a job of kind k as a client would send it, mostly valid, often not.
func randomJob(t *testing.T, rng *rand.Rand, k *v1beta1.Kind) *unstructured.Unstructured {
	t.Helper()
	c, err := crdOf(k)
	if err != nil {
		t.Fatal(err)
	}
	typeKey, portKey, types := groupKeys(t, c)
	pick := func(p float64) bool { return rng.Float64() < p }
	oneOf := func(vs ...any) any { return vs[rng.IntN(len(vs))] }

	meta := map[string]any{}
	switch rng.IntN(20) {
	case 0:
		meta["name"] = oneOf("Example_Job", "1abc", "a.b", strings.Repeat("a", 49), "-a")
	case 1:
		meta["generateName"] = oneOf("gen-", strings.Repeat("g", 45))
	case 2: // no name at all
	default:
		meta["name"] = oneOf("job", "j", strings.Repeat("a", 48), "a-b-1")
	}
	if pick(0.05) {
		meta["labels"] = map[string]any{"team": oneOf("a", "not valid!")}
	}

	// Groups of distinct types, mostly: a random subset in a random order, which holds the
	// schema's first type (the one that decides, in every kind so far) most of the time.
	rest := types[1:]
	if pick(0.2) {
		rest = types
	}
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	var groups []any
	n := 1 + rng.IntN(len(types))
	if pick(0.03) {
		n = 0
	}
	for i := range n {
		typ := types[i]
		switch {
		case pick(0.02):
			typ = oneOf("Bogus", strings.ToLower(typ), "").(string)
		case i > 0 && pick(0.03):
			typ = types[0] // a type twice
		}
		g := map[string]any{typeKey: typ}
		if pick(0.3) {
			g["replicas"] = oneOf(1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 10000, 0, -1, 10001)
		}
		if pick(0.2) {
			g[portKey] = oneOf(1, 2222, 2222, 2222, 2222, 2222, 65535, 0, 65536, -1)
		}
		if pick(0.3) {
			g["restartPolicy"] = oneOf("ExitCode", "OnFailure", "Never", "Always", "ExitCode", "OnFailure", "Never", "Always", "Sometimes")
		}
		if !pick(0.02) {
			g["template"] = randomTemplate(rng, k)
		}
		groups = append(groups, g)
	}
	spec := map[string]any{}
	if !pick(0.02) {
		spec["replicaSpecs"] = groups
	}
	if pick(0.3) {
		rp := map[string]any{}
		if pick(0.5) {
			rp["cleanPodPolicy"] = oneOf("All", "Running", "None", "All", "Running", "None", "All", "Running", "None", "Some")
		}
		if pick(0.5) {
			rp["backoffLimit"] = oneOf(0, 3, 0, 3, 0, 3, -1)
		}
		if pick(0.3) {
			rp["activeDeadlineSeconds"] = oneOf(1, 60, 1, 60, 0)
		}
		spec["runPolicy"] = rp
	}
	if k.Name == "TfJob" && pick(0.15) {
		spec["tensorboard"] = map[string]any{"logDir": oneOf("/logs", "/logs", ""), "serviceType": oneOf("ClusterIP", "NodePort", "Internal")}
	}
	data, err := json.Marshal(map[string]any{
		"apiVersion": v1beta1.GroupVersion.String(),
		"kind":       k.Name,
		"metadata":   meta,
		"spec":       spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

// randomTemplate is a pod template with the kind's container, mostly.
func randomTemplate(rng *rand.Rand, k *v1beta1.Kind) map[string]any {
	tmpl := corev1.PodTemplateSpec{}
	name := k.Container
	if rng.IntN(25) == 0 {
		name = "trainer"
	}
	image := "mlkube/trainer:dev"
	if rng.IntN(25) == 0 {
		image = ""
	}
	tmpl.Spec.Containers = []corev1.Container{{Name: name, Image: image}}
	if rng.IntN(5) == 0 {
		tmpl.Spec.Containers = append(tmpl.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	}
	if rng.IntN(10) == 0 {
		tmpl.Spec.InitContainers = []corev1.Container{{Name: "init", Image: []string{"busybox", ""}[rng.IntN(2)]}}
	}
	if rng.IntN(50) == 0 {
		tmpl.Spec.Containers = nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		panic(err)
	}
	return m
}

// groupKeys reads from the CRD what a kind's replica groups call their type and port, and the
// types there are: the replicaSpecs list's map key and its enum, and the port that defaults.
func groupKeys(t *testing.T, c *crd) (typeKey, portKey string, types []string) {
	t.Helper()
	list := c.structural.Properties["spec"].Properties["replicaSpecs"]
	if len(list.XListMapKeys) != 1 || list.Items == nil {
		t.Fatalf("%s: spec.replicaSpecs is no list map with one key", c.kind.Name)
	}
	typeKey = list.XListMapKeys[0]
	item := list.Items
	for _, e := range item.Properties[typeKey].ValueValidation.Enum {
		types = append(types, e.Object.(string))
	}
	for name := range item.Properties {
		if strings.HasSuffix(strings.ToLower(name), "port") {
			portKey = name
		}
	}
	if len(types) == 0 || portKey == "" {
		t.Fatalf("%s: no replica types or port in the schema", c.kind.Name)
	}
	return typeKey, portKey, types
}
