package replicajob

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// tfFramework is a framework of kind TfJob, enough to map events.
type tfFramework struct{ Framework }

func (tfFramework) Kind() *v1beta1.Kind { return v1beta1.KindOf(&v1beta1.TfJob{}) }

// A pod's or service's event reaches the job of the reconciler's kind that controls it, in the
// object's namespace, as Owns would send it; an object that job only owns, or that a job of
// another kind or group controls, reaches none.
func TestEventsReachTheControllingJob(t *testing.T) {
	e := &Reconciler{Framework: tfFramework{}}
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "job", UID: "u", Controller: ptr.To(controller)}
	}
	for name, c := range map[string]struct {
		refs []metav1.OwnerReference
		want bool
	}{
		"controlled by a TfJob":          {[]metav1.OwnerReference{ref("mlkube.io/v1beta1", "TfJob", true)}, true},
		"of another version of the API":  {[]metav1.OwnerReference{ref("mlkube.io/v1", "TfJob", true)}, true},
		"owned, not controlled":          {[]metav1.OwnerReference{ref("mlkube.io/v1beta1", "TfJob", false)}, false},
		"controlled by an MXJob":         {[]metav1.OwnerReference{ref("mlkube.io/v1beta1", "MXJob", true)}, false},
		"a TfJob of another group":       {[]metav1.OwnerReference{ref("kubeflow.org/v1", "TfJob", true)}, false},
		"no owner":                       {nil, false},
		"owned by one, controlled by it": {[]metav1.OwnerReference{ref("v1", "ConfigMap", false), ref("mlkube.io/v1beta1", "TfJob", true)}, true},
	} {
		for _, obj := range []ctrl.Object{&corev1.Pod{}, &corev1.Service{}} {
			obj.SetNamespace("ns")
			obj.SetOwnerReferences(c.refs)
			got := e.controllingJob(context.Background(), obj)
			want := 0
			if c.want {
				want = 1
			}
			if len(got) != want || (want == 1 && got[0].NamespacedName != (types.NamespacedName{Namespace: "ns", Name: "job"})) {
				t.Errorf("%s (%T): %v", name, obj, got)
			}
		}
	}
}
