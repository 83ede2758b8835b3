package operator

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Two replicas of one job, as two watch events decode them (each string its own copy), keep
// every value through the cache's transform, and share the strings they have in common.
func TestCachedPodsShareTheirStrings(t *testing.T) {
	pod := func(i string) *corev1.Pod {
		s := func(v string) string { return strings.Clone(v) }
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s("ns"), Name: s("job-worker-" + i), UID: types.UID(s("pod-" + i)),
				Labels: map[string]string{s("mlkube.io/job-name"): s("job"), s("mlkube.io/replica-index"): s(i)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: s("mlkube.io/v1beta1"), Kind: s("TfJob"), Name: s("job"),
					UID: types.UID(s("job-uid")), Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{NodeName: s("node"), Containers: []corev1.Container{{Name: "tensorflow"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPhase(s("Running")), ContainerStatuses: []corev1.ContainerStatus{{Name: s("tensorflow"), Image: s("img")}}},
		}
	}
	a, b := pod("0"), pod("1")
	wantA := a.DeepCopy()
	wantA.Spec = corev1.PodSpec{NodeName: "node"}
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := stripPodSpec(p); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(a, wantA) {
		t.Errorf("the transform changed a value:\n%+v\nwant\n%+v", a, wantA)
	}
	same := func(what, x, y string) {
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: two copies", what)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("owner's UID", string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID))
	same("owner's name and the job-name label", a.OwnerReferences[0].Name, b.Labels["mlkube.io/job-name"])
	same("phase", string(a.Status.Phase), string(b.Status.Phase))
	same("image", a.Status.ContainerStatuses[0].Image, b.Status.ContainerStatuses[0].Image)
	for k := range a.Labels {
		for l := range b.Labels {
			if k == l {
				same("label key "+k, k, l)
			}
		}
	}
}
