package jobtest

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// KindOf is the conformance kit of a framework's kind, made from its entry in v1beta1.Kinds
// alone, so that every registered kind runs the same suite with no code of its own: a job of
// three replicas (kitGroups), replica 0 of its first decider deciding, and the check that every
// replica's training container got exactly the env its framework gives that replica.
func KindOf(fw replicajob.Framework) Kind {
	k := fw.Kind()
	decider := k.Deciders[0]
	groups := kitGroups(k)
	other := groups[len(groups)-1].Type
	otherFrom := 0
	if other == decider {
		otherFrom = 1 // replica 0 of the one group decides; the others are 1 and 2
	}
	return Kind{
		Name: k.Name, Decider: decider, Other: other, OtherFrom: otherFrom,
		NewJob: func(ns, name string, policy v1beta1.RunPolicy) client.Object {
			return newJob(k, ns, name, policy)
		},
		Status: func(obj client.Object) *v1beta1.JobStatus { return obj.(v1beta1.Job).JobStatus() },
		CheckEnv: func(t *testing.T, job client.Object, pod corev1.Pod) {
			t.Helper()
			cluster, err := replicajob.Resolve(fw, job.(v1beta1.Job))
			if err != nil {
				t.Fatal(err)
			}
			typ := strings.ToUpper(pod.Labels[v1beta1.LabelReplicaType])
			index, _ := strconv.Atoi(pod.Labels[v1beta1.LabelReplicaIndex])
			want := fw.Env(cluster, typ, index)
			for _, c := range pod.Spec.Containers {
				if c.Name == k.Container && !reflect.DeepEqual(c.Env, want) {
					t.Errorf("pod %s container %s env\n%+v\nwant the framework's\n%+v", pod.Name, c.Name, c.Env, want)
				}
			}
		},
	}
}

// kitGroups are the replica groups of the kit's job of kind k, three replicas in all: one of its
// first decider, and two WORKERs; or, for a kind of one replica type, one group of
// three, whose replica 0 decides.
func kitGroups(k *v1beta1.Kind) []Group {
	tmpl := map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": k.Container, "image": "mlkube/trainer:test"},
	}}}
	if len(k.Types) == 1 {
		return []Group{{Type: k.Types[0], Replicas: 3, Template: tmpl}}
	}
	return []Group{{Type: k.Deciders[0], Replicas: 1, Template: tmpl}, {Type: "WORKER", Replicas: 2, Template: tmpl}}
}

// newJob builds the kit's job of kind k (kitGroups) as a manifest would spell it, so that it
// needs nothing of the kind but the table's entry.
func newJob(k *v1beta1.Kind, ns, name string, policy v1beta1.RunPolicy) client.Object {
	runPolicy, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&policy)
	if err != nil {
		panic(err)
	}
	manifest := ManifestOf(k, ns, name, runPolicy, kitGroups(k)...)
	job := k.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(manifest, job); err != nil {
		panic(err)
	}
	return job
}

// Group is a replica group as ManifestOf writes it; a zero field is left out, to be defaulted.
type Group struct {
	Type          string
	Replicas      int64
	Port          int64
	RestartPolicy string
	Template      map[string]any
}

// ManifestOf is a job of kind k as a manifest spells it, with the field names of k's entry in
// v1beta1.Kinds, so that a test makes a job of any kind alike.
func ManifestOf(k *v1beta1.Kind, ns, name string, runPolicy map[string]any, groups ...Group) map[string]any {
	var specs []any
	for _, g := range groups {
		spec := map[string]any{k.TypeField: g.Type, "template": g.Template}
		if g.Replicas != 0 {
			spec["replicas"] = g.Replicas
		}
		if g.Port != 0 {
			spec[k.PortField] = g.Port
		}
		if g.RestartPolicy != "" {
			spec["restartPolicy"] = g.RestartPolicy
		}
		specs = append(specs, spec)
	}
	spec := map[string]any{"replicaSpecs": specs}
	if runPolicy != nil {
		spec["runPolicy"] = runPolicy
	}
	return map[string]any{
		"apiVersion": v1beta1.GroupVersion.String(), "kind": k.Name,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     spec,
	}
}
