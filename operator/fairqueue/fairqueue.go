// Package fairqueue is the work queue of the operator's controllers: client-go's rate-limited
// work queue, handing out its items round robin across namespaces, each namespace's items in
// the order they came. A thousand jobs just created in one namespace then hold up a job created
// in another by one reconcile at most, not by a thousand.
//
// Why this queue. controller-runtime's default (v0.25, Options.UsePriorityQueue) is its priority
// queue: highest priority first and, within a priority, the oldest first. Every new job and every
// change to one comes at the same priority, so for the operator it is FIFO, as client-go's queue
// is: a tenant's burst of jobs holds up everyone's. Rather than write a queue and its guarantees
// again, this keeps client-go's (an item never handed to two workers at once; one added while it
// is processed handed out again after Done; AddAfter, AddRateLimited, Forget, NumRequeues;
// ShutDown and ShutDownWithDrain; the workqueue_* metrics controller-runtime registers for it)
// and changes only the order, through the storage client-go lets a queue plug in
// (workqueue.TypedQueueConfig.Queue). What is given up is the priority queue's low priority for
// the events of the cache's first list and of resyncs: a restarted operator re-checks every job,
// and with this queue a job created meanwhile in another namespace is still handed out within a
// round, but one in a namespace with many jobs waits for its turn among them.
package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// New makes a controller's queue; it is a controller.Options.NewQueue. The rate limiter is the
// one controller-runtime chose for the controller, and name labels the queue's metrics.
func New(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return newWithClock(name, rateLimiter, clock.RealClock{})
}

func newWithClock(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request], clk clock.WithTicker) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{
		Name: name, Clock: clk, Queue: &byNamespace{queued: map[string][]reconcile.Request{}},
	})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{
		Name: name, Clock: clk, Queue: queue,
	})
	return workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
		Name: name, Clock: clk, DelayingQueue: delaying,
	})
}

// byNamespace holds the items ready to be handed out. client-go's queue calls it under its own
// lock, with each item at most once (it keeps the set of items queued and being processed), so
// it needs no lock and no de-duplication of its own.
type byNamespace struct {
	// queued is each namespace's items, oldest first; a namespace with none is not in it.
	queued map[string][]reconcile.Request
	// turns is the namespaces with items, the next to be served first. Served, a namespace
	// goes to the back if it still has items: a new namespace waits one round at most.
	turns []string
	n     int
}

func (q *byNamespace) Push(item reconcile.Request) {
	items, ok := q.queued[item.Namespace]
	if !ok {
		q.turns = append(q.turns, item.Namespace)
	}
	q.queued[item.Namespace] = append(items, item)
	q.n++
}

// Pop is called only when Len is above zero.
func (q *byNamespace) Pop() reconcile.Request {
	ns := q.turns[0]
	q.turns[0] = "" // the backing array outlives the slice
	q.turns = q.turns[1:]
	items := q.queued[ns]
	item := items[0]
	items[0] = reconcile.Request{}
	if len(items) == 1 {
		delete(q.queued, ns)
	} else {
		q.queued[ns] = items[1:]
		q.turns = append(q.turns, ns)
	}
	q.n--
	return item
}

// Touch is an item added again while it waits: it keeps its place, as in client-go's FIFO.
func (q *byNamespace) Touch(reconcile.Request) {}

func (q *byNamespace) Len() int { return q.n }
