package jobwatch

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The container that decides a replica comes from the kind's row of the table, by the pod's kind
// label, else by the containers it has; a pod of no kind is decided by its first container, never
// by one kind's name it does not have.
func TestContainerComesFromTheTable(t *testing.T) {
	pod := func(kindLabel string, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if kindLabel != "" {
			p.Labels[v1beta1.LabelJobKind] = kindLabel
		}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		}
		return p
	}
	for _, k := range v1beta1.Kinds {
		if got := Container(pod(k.Label(), "sidecar", k.Container)); got != k.Container {
			t.Errorf("a %s pod: %q, want %q", k.Name, got, k.Container)
		}
		if got := Container(pod("", "sidecar", k.Container)); got != k.Container {
			t.Errorf("an unlabelled pod with %s's container: %q, want %q", k.Name, got, k.Container)
		}
	}
	if got := Container(pod("", "trainer", "sidecar")); got != "trainer" {
		t.Errorf("a pod of no kind: %q, want its first container", got)
	}
	k := v1beta1.Kinds[0]
	if got := Container(pod(k.Label(), "trainer", "sidecar")); got != "trainer" {
		t.Errorf("a %s pod without %s: %q, want its first container", k.Name, k.Container, got)
	}
}
