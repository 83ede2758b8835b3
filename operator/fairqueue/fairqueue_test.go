package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/controller-runtime/pkg/controller" // sets controller-runtime's workqueue metrics provider, as in the operator
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func req(ns string, i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("job-%d", i)}}
}

func newQueue(t *testing.T) queue {
	t.Helper()
	q := New("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	return q
}

// get hands out the next item, failing the test on a queue that says it shut down.
func get(t *testing.T, q queue) reconcile.Request {
	t.Helper()
	item, shutdown := q.Get()
	if shutdown {
		t.Fatal("queue shut down")
	}
	return item
}

// The case: a thousand jobs just created in one namespace, then one in another. The
// other namespace's job is handed out second, not a thousand and first.
func TestJobBehindAnotherNamespacesBacklogIsHandedOutAtOnce(t *testing.T) {
	q := newQueue(t)
	for i := 0; i < 1000; i++ {
		q.Add(req("a", i))
	}
	q.Add(req("b", 0))
	var got []reconcile.Request
	for range 2 {
		got = append(got, get(t, q))
	}
	if got[0] != req("a", 0) || got[1] != req("b", 0) {
		t.Fatalf("handed out %v first, want a/job-0 then b/job-0", got)
	}
	// a's backlog is still all there, in its order.
	for i := 1; i < 1000; i++ {
		if item := get(t, q); item != req("a", i) {
			t.Fatalf("handed out %v, want %v", item, req("a", i))
		}
	}
}

// Round robin across the namespaces with items, each namespace's items in the order they came;
// a namespace that runs out and comes back waits behind those already waiting.
func TestRoundRobinAcrossNamespacesFIFOWithin(t *testing.T) {
	q := newQueue(t)
	for _, r := range []reconcile.Request{req("a", 1), req("a", 2), req("a", 3), req("b", 1), req("c", 1), req("c", 2)} {
		q.Add(r)
	}
	want := []reconcile.Request{req("a", 1), req("b", 1), req("c", 1), req("a", 2)}
	for _, w := range want {
		if got := get(t, q); got != w {
			t.Fatalf("handed out %v, want %v", got, w)
		}
	}
	// b ran out; back now, it queues behind c and a, whose turns come first.
	q.Add(req("b", 2))
	for _, w := range []reconcile.Request{req("c", 2), req("a", 3), req("b", 2)} {
		if got := get(t, q); got != w {
			t.Fatalf("handed out %v, want %v", got, w)
		}
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("Len %d after everything was handed out", n)
	}
}

// An item added again while it waits is queued once and keeps its place.
func TestAddedTwiceWhileWaitingIsQueuedOnce(t *testing.T) {
	q := newQueue(t)
	q.Add(req("a", 1))
	q.Add(req("a", 2))
	q.Add(req("a", 1))
	if n := q.Len(); n != 2 {
		t.Fatalf("Len %d, want 2", n)
	}
	if got := get(t, q); got != req("a", 1) {
		t.Fatalf("handed out %v first, want a/job-1", got)
	}
}

// An item added while a worker processes it is not handed to a second worker, but handed out
// again once the first calls Done.
func TestAddedWhileProcessingIsHandedOutAfterDone(t *testing.T) {
	q := newQueue(t)
	q.Add(req("a", 1))
	first := get(t, q)
	q.Add(first)
	if n := q.Len(); n != 0 {
		t.Fatalf("Len %d while the only item is being processed, want 0", n)
	}
	q.Add(req("b", 1))
	if got := get(t, q); got != req("b", 1) {
		t.Fatalf("handed out %v while a/job-1 is processed, want b/job-1", got)
	}
	q.Done(first)
	if got := get(t, q); got != first {
		t.Fatalf("handed out %v after Done, want %v again", got, first)
	}
}

// stepUntil moves the fake clock on until cond holds. The delaying queue sets its timer from the
// clock's time when its loop gets to an item, which may be after a step: one step might not do.
func stepUntil(t *testing.T, clk *testingclock.FakeClock, step time.Duration, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 10000 {
			t.Fatal("condition never held")
		}
		clk.Step(step)
		time.Sleep(time.Millisecond) // the delaying queue's loop runs
	}
}

// Delayed and rate-limited items wait for their time, then take their namespace's turn like
// any other; the rate limiter is the one given, its failures counted per item until Forget.
func TestDelayedItemsJoinTheRoundRobinWhenReady(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Hour)
	q := newWithClock("", limiter, clk)
	t.Cleanup(q.ShutDown)

	q.AddAfter(req("b", 1), time.Minute)
	q.AddRateLimited(req("c", 1))
	q.AddRateLimited(req("c", 1))
	if n := limiter.NumRequeues(req("c", 1)); n != 2 {
		t.Fatalf("NumRequeues %d after two AddRateLimited, want 2", n)
	}
	for i := 0; i < 3; i++ {
		q.Add(req("a", i))
	}
	if n := q.Len(); n != 3 {
		t.Fatalf("Len %d before the clock moved, want a's 3 only", n)
	}
	if got := get(t, q); got != req("a", 0) {
		t.Fatalf("handed out %v, want a/job-0", got)
	}
	stepUntil(t, clk, time.Minute, func() bool { return q.Len() == 4 })
	// a's turn (it was served last, but b and c were not waiting then), b and c in the order
	// they became ready, then a again.
	var got []string
	for range 4 {
		got = append(got, get(t, q).String())
	}
	middle := []string{got[1], got[2]}
	slices.Sort(middle)
	if got[0] != "a/job-1" || got[3] != "a/job-2" || middle[0] != "b/job-1" || middle[1] != "c/job-1" {
		t.Fatalf("handed out %v, want a/job-1, then b/job-1 and c/job-1 (either order), then a/job-2", got)
	}
	q.Forget(req("c", 1))
	if n := q.NumRequeues(req("c", 1)); n != 0 {
		t.Fatalf("NumRequeues %d after Forget, want 0", n)
	}
}

// Many workers and adders at once, as a controller runs it (go test -race): no item is ever
// with two workers, and every Add is followed by a Get of that item, however they interleave.
func TestConcurrentWorkersNeverShareAnItemAndLoseNoAdd(t *testing.T) {
	q := newQueue(t)
	const items, adders, addsEach = 50, 4, 500
	key := func(i int) reconcile.Request { return req(fmt.Sprintf("ns-%d", i%5), i) }
	var mu sync.Mutex
	adds := map[reconcile.Request]int{} // Adds made, counted before each Add
	seen := map[reconcile.Request]int{} // adds[item] when a worker got it
	inFlight := map[reconcile.Request]bool{}
	var workers sync.WaitGroup
	for range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[item] {
					t.Errorf("%v handed to two workers at once", item)
				}
				inFlight[item] = true
				seen[item] = adds[item]
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
				mu.Lock()
				delete(inFlight, item)
				mu.Unlock()
				q.Done(item)
			}
		}()
	}
	var adding sync.WaitGroup
	for range adders {
		adding.Add(1)
		go func() {
			defer adding.Done()
			for range addsEach {
				item := key(rand.IntN(items))
				mu.Lock()
				adds[item]++
				mu.Unlock()
				q.Add(item)
			}
		}()
	}
	adding.Wait()
	// client-go's ShutDown lets the workers empty the queue, items re-added while processed
	// included, before Get says it shut down.
	q.ShutDown()
	workers.Wait()
	for item, n := range adds {
		if seen[item] != n {
			t.Errorf("%v: %d adds, the last one handed out after %d: an Add was lost", item, n, seen[item])
		}
	}
}

// ShutDown wakes a worker waiting in Get and drops later Adds; ShutDownWithDrain waits for the
// items being processed.
func TestShutDown(t *testing.T) {
	q := newQueue(t)
	got := make(chan bool)
	go func() { _, shutdown := q.Get(); got <- shutdown }()
	q.ShutDown()
	if !<-got {
		t.Fatal("Get returned an item from an empty queue that shut down")
	}
	q.Add(req("a", 1))
	if n := q.Len(); n != 0 {
		t.Fatalf("Len %d after an Add to a queue that shut down", n)
	}

	q = newQueue(t)
	q.Add(req("a", 1))
	item := get(t, q)
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	for !q.ShuttingDown() {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while an item was still being processed")
	default:
	}
	q.Done(item)
	<-drained
}

// A named queue reports the workqueue metrics controller-runtime registers, under its
// controller's name, as its default queues do.
func TestNamedQueueReportsWorkqueueMetrics(t *testing.T) {
	q := New("fairqueue-test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	q.Add(req("a", 1))
	q.Add(req("b", 1))
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "fairqueue-test" {
					values[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	if values["workqueue_adds_total"] != 2 || values["workqueue_depth"] != 2 {
		t.Fatalf("workqueue metrics of the queue: %v, want 2 adds and a depth of 2", values)
	}
}
