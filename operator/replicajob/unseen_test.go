package replicajob_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolsevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// A reconcile that comes before the cache shows the pods and services it created (the job's
// own status write brings one within milliseconds) does not create them again: each would be
// a request answered 409. What the cache has shown is created again at once when it goes (a
// restart deletes a pod), and what it never shows is created again after a while (someone
// deleted it first). Nor is status written until the cache shows all it created. The engine runs here on a direct client whose lists play a lagging cache:
// they show only the objects the test has let through.
func TestCreatedObjectsAreNotCreatedTwice(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	must(t, k8s.Create(ctx, standardJob(ns, "lagging"))) // 5 replicas: 5 pods and the job's service

	var creates atomic.Int32
	var mu sync.Mutex
	// What the cache does not show, by kind and name (a replica's pod and service share a name);
	// new objects start hidden.
	hidden := map[string]bool{}
	key := func(o runtime.Object) string { return fmt.Sprintf("%T/%s", o, o.(metav1.Object).GetName()) }
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	c := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates.Add(1)
			err := c.Create(ctx, obj, opts...)
			if err == nil {
				mu.Lock()
				hidden[key(obj)] = true
				mu.Unlock()
			}
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			// The apiserver knows no owner index: select by the job's label instead.
			if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: "lagging"}); err != nil {
				return err
			}
			items, err := apimeta.ExtractList(list)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			var shown []runtime.Object
			for _, o := range items {
				if !hidden[key(o)] {
					shown = append(shown, o)
				}
			}
			return apimeta.SetList(list, shown)
		},
	})
	showAll := func() { mu.Lock(); clear(hidden); mu.Unlock() }
	now := time.Now()
	e := &replicajob.Reconciler{Client: c, Framework: tfjob.Framework{}, Recorder: toolsevents.NewFakeRecorder(100),
		Now: func() time.Time { return now }}
	reconcileOnce := func() reconcile.Result {
		t.Helper()
		res, err := e.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "lagging"}})
		must(t, err)
		return res
	}
	wantCreates := func(n int32, when string) {
		t.Helper()
		if got := creates.Load(); got != n {
			t.Fatalf("%s: %d creates, want %d", when, got, n)
		}
	}
	deleteNow := func(obj client.Object) {
		t.Helper()
		must(t, k8s.Delete(ctx, obj, client.GracePeriodSeconds(0)))
		eventually(t, obj.GetName()+" gone", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err == nil {
				return errorf("still there")
			}
			return nil
		})
	}

	reconcileOnce()
	wantCreates(6, "first reconcile")
	if res := reconcileOnce(); res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
		t.Errorf("a reconcile waiting for its objects to show asks to be requeued after %v, want within 30s", res.RequeueAfter)
	}
	wantCreates(6, "a reconcile before the cache shows them")
	// Nor is the status written from that partial view: it would be written again moments later.
	if job := getJob(t, ns, "lagging"); job.Status.StartTime != nil || len(job.Status.Conditions) > 0 {
		t.Errorf("status written before the cache showed the objects: %+v", job.Status)
	}

	// Shown, then deleted (as a restart deletes a pod): created again at once.
	showAll()
	reconcileOnce()
	wantCreates(6, "a reconcile that sees them all")
	if job := getJob(t, ns, "lagging"); !apimeta.IsStatusConditionTrue(job.Status.Conditions, v1beta1.JobCreated) {
		t.Errorf("once the cache shows every object the status says Created; it is %+v", job.Status)
	}
	deleteNow(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lagging-worker-1"}})
	reconcileOnce()
	wantCreates(7, "a reconcile after a pod it had seen was deleted")

	// Never shown, and deleted before it was: taken to exist until createdTTL (30s) has passed,
	// then created again.
	deleteNow(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lagging-worker-1"}})
	reconcileOnce()
	wantCreates(7, "a reconcile while the pod it created is not shown yet")
	now = now.Add(31 * time.Second)
	reconcileOnce()
	wantCreates(8, "a reconcile 31s after creating a pod the cache never showed")
	if _, ok := listPods(t, ns)["lagging-worker-1"]; !ok {
		t.Errorf("pod lagging-worker-1 was not created again")
	}
}
