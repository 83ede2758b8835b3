package replicajob_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// The training container's env is the framework's first, then the template's: a template's
// variable that refers to one of the framework's ($(MASTER_ADDR)) comes after it, which is what
// makes Kubernetes expand it; a template that sets one of the framework's own keeps its value,
// the framework's is left out, and the job gets a Warning event EnvOverridden naming it. Every
// kind, from its table entry.
func TestTemplateEnvComesAfterTheFrameworksAndWins(t *testing.T) {
	for _, fw := range operator.Frameworks {
		k := fw.Kind()
		t.Run(k.Name, func(t *testing.T) {
			ns := namespace(t)
			startOperator(t, ns)
			kit := jobtest.KindOf(fw)
			plain := kit.NewJob(ns, "env", v1beta1.RunPolicy{})
			cluster, err := replicajob.Resolve(fw, plain.(v1beta1.Job))
			must(t, err)
			framework := fw.Env(cluster, kit.Decider, 0)
			// The first of the framework's variables is referred to, the last set by the template:
			// the first group's template sets it, the last group's refers (TfJob has one variable,
			// TF_CONFIG; a kind of one group does both in it).
			referred, mine := framework[0].Name, framework[len(framework)-1].Name
			refers := corev1.EnvVar{Name: "MY_ADDR", Value: "$(" + referred + ")/data"}
			sets := corev1.EnvVar{Name: mine, Value: "mine"}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(plain)
			must(t, err)
			specs, _, _ := unstructured.NestedSlice(obj, "spec", "replicaSpecs")
			own := map[string][]corev1.EnvVar{}
			for i, g := range specs {
				typ := g.(map[string]any)[k.TypeField].(string)
				if i == len(specs)-1 {
					own[typ] = append(own[typ], refers)
				}
				if i == 0 {
					own[typ] = append(own[typ], sets)
				}
				envs, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.Container{Env: own[typ]})
				must(t, err)
				containers, _, _ := unstructured.NestedSlice(g.(map[string]any), "template", "spec", "containers")
				containers[0].(map[string]any)["env"] = envs["env"]
				must(t, unstructured.SetNestedSlice(g.(map[string]any), containers, "template", "spec", "containers"))
			}
			if referred == mine && len(specs) == 1 {
				t.Fatalf("%s has one group and one variable: the test cannot both refer to it and set it", k.Name)
			}
			must(t, unstructured.SetNestedSlice(obj, specs, "spec", "replicaSpecs"))
			must(t, k8s.Create(context.Background(), &unstructured.Unstructured{Object: obj}))

			for name, pod := range waitPods(t, ns, podsOf(kit, "env")...) {
				typ := strings.ToUpper(pod.Labels[v1beta1.LabelReplicaType])
				index := 0
				fmt.Sscan(pod.Labels[v1beta1.LabelReplicaIndex], &index)
				var want []corev1.EnvVar
				for _, v := range fw.Env(cluster, typ, index) {
					if !slices.ContainsFunc(own[typ], func(o corev1.EnvVar) bool { return o.Name == v.Name }) {
						want = append(want, v)
					}
				}
				want = append(want, own[typ]...)
				got := pod.Spec.Containers[0].Env
				if !slices.EqualFunc(got, want, func(a, b corev1.EnvVar) bool { return a.Name == b.Name && a.Value == b.Value }) {
					t.Errorf("pod %s env\n%+v\nwant the framework's but the template's own, then the template's\n%+v", name, got, want)
				}
			}
			jobtest.WaitEvent(t, ns, "env", "EnvOverridden", kit.Decider+" sets "+mine, "container "+k.Container)
		})
	}
}
