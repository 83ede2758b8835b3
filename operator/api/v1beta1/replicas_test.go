package v1beta1

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// A replica's labels select it among its job's pods and read back as the replica they name;
// TensorBoard's pod, another job's and another kind's are not selected, and labels that name no
// replica read as none.
func TestReplicaLabelsSelectorAndReplicaOfAgree(t *testing.T) {
	for _, k := range Kinds {
		for i, typ := range k.Types {
			l := k.ReplicaLabels("mnist", typ, i+2)
			if !k.ReplicaPods("mnist").Matches(labels.Set(l)) {
				t.Errorf("%s: %v not selected by %s", k.Name, l, k.ReplicaPods("mnist"))
			}
			if gotTyp, gotIndex, ok := ReplicaOf(l); !ok || gotTyp != k.ReplicaLabels("x", typ, 0)[LabelReplicaType] || gotIndex != i+2 {
				t.Errorf("%s: ReplicaOf(%v) = %q, %d, %v", k.Name, l, gotTyp, gotIndex, ok)
			}
		}
		tensorboard := labels.Set{LabelJobName: "mnist", LabelJobKind: k.Label(), LabelTensorboard: "true"}
		other := labels.Set(k.ReplicaLabels("mnist-2", k.Types[0], 0))
		for _, l := range []labels.Set{tensorboard, other} {
			if k.ReplicaPods("mnist").Matches(l) {
				t.Errorf("%s: %v selected as one of mnist's replicas", k.Name, l)
			}
		}
	}
	if Kinds[0].ReplicaPods("mnist").Matches(labels.Set(Kinds[1].ReplicaLabels("mnist", Kinds[1].Types[0], 0))) {
		t.Error("another kind's replica of the same name selected")
	}
	for _, l := range []map[string]string{
		{LabelReplicaType: "worker"}, {LabelReplicaType: "worker", LabelReplicaIndex: "one"},
		{LabelReplicaType: "worker", LabelReplicaIndex: "-1"}, {LabelReplicaIndex: "0"},
	} {
		if _, _, ok := ReplicaOf(l); ok {
			t.Errorf("ReplicaOf(%v) reads a replica", l)
		}
	}
}
