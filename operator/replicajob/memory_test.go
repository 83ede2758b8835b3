package replicajob_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolsevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job whose pods a quota refused is deleted and created again under its name, with the quota
// gone, before the engine saw it gone (a delete and a create within one pass of the work queue
// come as one request): the new job inherits nothing of the old one's memory, and creates its
// pods at once instead of waiting out the old one's backoff. The clock stands still, so nothing
// here passes by waiting.
func TestJobCreatedAgainInheritsNoBackoff(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	full := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"}, Spec: corev1.ResourceQuotaSpec{Hard: full}}
	must(t, k8s.Create(ctx, quota))
	quota.Status = corev1.ResourceQuotaStatus{Hard: full, Used: full} // no quota controller here
	must(t, k8s.Status().Update(ctx, quota))

	var podCreates atomic.Int32
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	c := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				podCreates.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			// The apiserver knows no owner index: select by the job's label instead.
			return c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: "again"})
		},
	})
	now := time.Now()
	e := &replicajob.Reconciler{Client: c, Framework: tfjob.Framework{}, Recorder: toolsevents.NewFakeRecorder(100),
		Now: func() time.Time { return now }}
	reconcileOnce := func() {
		t.Helper()
		_, err := e.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "again"}})
		must(t, err)
	}

	old := newJob(ns, "again", replicaGroup("WORKER", 1))
	must(t, k8s.Create(ctx, old))
	reconcileOnce()
	if podCreates.Load() == 0 {
		t.Fatal("the first job tried no pod")
	}
	refused := podCreates.Load()
	reconcileOnce()
	if podCreates.Load() != refused {
		t.Fatalf("a job whose pod was just refused tried again at once: the backoff is not working")
	}

	must(t, k8s.Delete(ctx, quota))
	must(t, k8s.Delete(ctx, old))
	eventually(t, "the old job gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(old), newJob(ns, "again")); err == nil {
			return errorf("still there")
		}
		return nil
	})
	must(t, k8s.Create(ctx, newJob(ns, "again", replicaGroup("WORKER", 1))))
	reconcileOnce()
	if podCreates.Load() == refused {
		t.Fatalf("the job created again waits out its predecessor's backoff: no pod tried")
	}
	if _, ok := listPods(t, ns)["again-worker-0"]; !ok {
		t.Errorf("pod again-worker-0 not created")
	}
}
