package v1beta1

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// What makes a pod one of a job's replicas, stated once beside the labels: the operator labels
// each replica so, and devctl and the dashboard find a job's replicas and tell which each is
// by the same functions.

// ReplicaLabels are the labels of the pod and service of replica (typ, index) of job name of
// kind k.
func (k *Kind) ReplicaLabels(name, typ string, index int) map[string]string {
	return map[string]string{
		LabelJobName:      name,
		LabelJobKind:      k.Label(),
		LabelReplicaType:  strings.ToLower(typ),
		LabelReplicaIndex: strconv.Itoa(index),
	}
}

// ReplicaPods selects the replica pods of kind k's jobs called name: one job's and, under the
// same name, its predecessors'. TensorBoard's pods, which have the job's labels but no replica
// type, are left out. Anyone who may create a pod may label it so: a pod is a job's only when
// its controller owner reference carries the job's UID.
func (k *Kind) ReplicaPods(name string) labels.Selector {
	hasType, err := labels.NewRequirement(LabelReplicaType, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key and operator: cannot fail
	}
	return labels.SelectorFromSet(labels.Set{LabelJobName: name, LabelJobKind: k.Label()}).Add(*hasType)
}

// ReplicaOf is the replica a pod or service plays, from its labels: its type as the label has
// it (lower case) and its index. ok is false for one that is no replica (TensorBoard's, or a
// label that is no index).
func ReplicaOf(l map[string]string) (typ string, index int, ok bool) {
	typ = l[LabelReplicaType]
	index, err := strconv.Atoi(l[LabelReplicaIndex])
	if typ == "" || err != nil || index < 0 {
		return "", -1, false
	}
	return typ, index, true
}
