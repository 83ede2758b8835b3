package replicajob

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// act does what decide decided: it deletes, expires, creates. What the apiserver answers (a
// refused create, objects the cache does not show yet) is left in the pass for the status.
func (e *Reconciler) act(ctx context.Context, p *pass) error {
	if p.unreadable != "" {
		// Said before the status is written: the CRD may refuse what the status holds, and then
		// the event is all that says it.
		e.flush(p)
		return nil
	}
	if err := e.delete(ctx, p.doomed); err != nil {
		return err
	}
	if p.expired {
		p.gone = true
		return e.expire(ctx, p.job)
	}
	if p.create {
		// Every pass of a running job, not only those that create pods: after the operator
		// restarts with a new CA, its running trainers need it in their bundle (a cache read
		// when it is there).
		e.prepareProgress(ctx, p)
		created, wait, r, err := e.create(ctx, p.job, p.mem, p.cluster, p.replicas)
		if err != nil {
			return err
		}
		if created != "" {
			e.record(p.job, event{kind: corev1.EventTypeNormal, reason: "Created", action: "Create", note: created})
			// A template that sets one of the framework's variables keeps its value (pods.go).
			if note := e.overriddenEnv(p.cluster); note != "" {
				e.record(p.job, event{kind: corev1.EventTypeWarning, reason: "EnvOverridden", action: "Create", note: note})
			}
		}
		if r != nil && r.Permanent {
			p.failNow(r.Reason, r.Error())
			return nil
		}
		p.refusal = r
		p.unshown = created != "" || wait > 0
		p.result.RequeueAfter = soonest(p.result.RequeueAfter, wait)
	}
	// A framework's extras (TensorBoard) stay after the job ended, so results can be looked at.
	if ext, ok := e.Framework.(Extension); ok && p.reporting && p.waiting == 0 && p.refusal == nil {
		r, err := e.reconcileExtras(ctx, ext, p.job, p.status)
		if err != nil {
			return err
		}
		p.refusal = r
	}
	return nil
}

// deletions are objects a pass deletes, all for one reason, which their errors name.
type deletions struct {
	objs []ctrl.Object
	why  string
}

func (e *Reconciler) delete(ctx context.Context, d deletions) error {
	for _, obj := range d.objs {
		// The UID precondition keeps a stale view from deleting the replacement.
		err := e.Client.Delete(ctx, obj, ctrl.Preconditions{UID: ptrUID(obj.GetUID())})
		log.FromContext(ctx).V(1).Info("deleting", "object", kindName(obj)+"/"+obj.GetName(), "for", d.why, "result", err)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("%s: deleting %s %s: %w", d.why, kindName(obj), obj.GetName(), err)
		}
	}
	return nil
}

// createFanOut is how many creates of one job are in flight at once. A job's pods and services
// do not depend on each other, and creating them one by one would make a large job's start
// time the sum of its round trips.
const createFanOut = 16

// create makes the pods and services that are missing. It returns a line for the event that
// sums up what it created (one event per reconcile, not one per object), how soon to look
// again when it left out objects it created before that the cache does not show yet, and the
// apiserver's refusal of an object, if any (refusals.go).
func (e *Reconciler) create(ctx context.Context, job v1beta1.Job, unseen *memory, cluster Cluster, replicas []*replica) (string, time.Duration, *Refusal, error) {
	now := e.now()
	var objs []ctrl.Object
	var wait time.Duration
	// missing says whether an object the cache does not show is to be created; an object shown
	// is forgotten.
	missing := func(key string, shown bool) bool {
		if shown {
			unseen.seen(key)
			return false
		}
		left := unseen.pending(key, now)
		wait = soonest(wait, left)
		return left == 0
	}
	if len(replicas) > 0 && !cluster.ServicePerReplica && missing("service/"+JobServiceName(job.GetName()), replicas[0].service) {
		objs = append(objs, e.newJobService(job))
	}
	for _, r := range replicas {
		if cluster.ServicePerReplica && missing("service/"+r.name, r.service) {
			objs = append(objs, e.newService(job, r.group, r.index))
		}
		if missing("pod/"+r.name, r.pod != nil) {
			objs = append(objs, e.newPod(job, cluster, r.group, r.index))
		}
	}
	var pods, services atomic.Int32
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, createFanOut)
	var wg sync.WaitGroup
	for _, obj := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := e.Client.Create(ctx, obj)
			if err == nil {
				unseen.add(kindName(obj)+"/"+obj.GetName(), now)
				if _, ok := obj.(*corev1.Pod); ok {
					pods.Add(1)
				} else {
					services.Add(1)
				}
				return
			}
			if r := refuse(ctx, e.reader(), job, obj, replicaHint, err); r != nil {
				mu.Lock()
				errs = append(errs, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	refusal, err := firstRefusal(errs)
	if err != nil {
		return "", 0, nil, err
	}
	if pods.Load() == 0 && services.Load() == 0 {
		return "", wait, refusal, nil
	}
	return fmt.Sprintf("created %s and %s", count(int(pods.Load()), "pod"), count(int(services.Load()), "service")), wait, refusal, nil
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
