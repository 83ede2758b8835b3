package replicajob

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler runs jobs of one framework. It is level-based: every call computes what should
// exist from the job and what the cache shows, acts, and writes status only when it changed.
type Reconciler struct {
	Client    ctrl.Client
	Framework Framework
	Recorder  recorder.EventRecorder
	// Pods, when set, changes every replica pod before it is created.
	Pods PodMutator
	// Reader reads past the cache, which holds only the operator's own pods and services: it
	// tells whose an object holding a replica's name is (refusals.go). Nil means Client.
	Reader ctrl.Reader
	// Now is the clock; tests leave it nil.
	Now func() time.Time

	// jobs is what the engine remembers of each job between reconciles (memory.go).
	jobs memories
}

// SetupWithManager registers the reconciler: it watches its jobs and everything they own.
func (e *Reconciler) SetupWithManager(mgr manager.Manager, opts controller.Options) error {
	b := builder.ControllerManagedBy(mgr).
		Named(e.Framework.Kind().Label()).
		For(e.Framework.Kind().New()).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		WithOptions(opts)
	if ext, ok := e.Framework.(Extension); ok {
		for _, obj := range ext.ExtraTypes() {
			b = b.Owns(obj)
		}
	}
	return b.Complete(e)
}

// replica is one replica of a job with its pod, when there is one.
type replica struct {
	group   Replica
	index   int
	name    string
	pod     *corev1.Pod
	service bool
	verdict Verdict
}

// event is one event to record once the status that explains it is written.
type event struct {
	kind, reason, action, note string
	related                    *corev1.Pod
}

func (e *Reconciler) record(job ctrl.Object, ev event) {
	// A nil *Pod in the interface would not be a nil runtime.Object.
	var related runtime.Object
	if ev.related != nil {
		related = ev.related
	}
	e.Recorder.Eventf(job, related, ev.kind, ev.reason, ev.action, "%s", ev.note)
}

// conflictRetry is how soon a job whose status write met a newer version is looked at again.
const conflictRetry = 50 * time.Millisecond

// Reconcile brings one job one step closer to what its spec and its pods say.
func (e *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := e.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		// The cache was behind: routine, not an error worth a log line and a backoff.
		log.FromContext(ctx).V(1).Info("job changed while reconciling; again with the newer version")
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		countError(e.Framework.Kind().Name, err)
	}
	return res, err
}

func (e *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := e.Framework.Kind().New()
	if err := e.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			e.jobs.forget(req.NamespacedName)
		}
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if !job.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	mem := e.jobs.of(job)
	if job.Unreadable() != "" {
		return reconcile.Result{}, e.holdUnreadable(ctx, job, mem, metav1.NewTime(e.now()))
	}
	mem.readable()
	status := job.JobStatus()
	written := status.DeepCopy()
	base := job.DeepCopyObject().(ctrl.Object)
	groups := job.Groups()
	policy := job.Policy()
	now := metav1.NewTime(e.now())
	if status.StartTime == nil {
		status.StartTime = &now
	}
	clearUnreadable(status, now)

	// A job is checked once, before anything is built for it; one that breaks its CRD's rules
	// or that no container could start with fails, saying why (cluster.go).
	var cluster Cluster
	if !finished(status) {
		var err error
		if cluster, err = e.resolve(job, mem); err != nil {
			return e.failNow(ctx, job, base, status, "InvalidSpec", err.Error(), now)
		}
	}

	replicas, pods, services, perReplica, err := e.observe(ctx, job, groups)
	if err != nil {
		return reconcile.Result{}, err
	}
	if perReplica {
		cluster = withServicePerReplica(cluster, job)
	}

	if !finished(status) && policy.Suspended() {
		return e.holdSuspended(ctx, job, base, written, groups, replicas, status, now)
	}
	if !finished(status) && meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobSuspended) {
		wait, err := e.resume(ctx, job, base, replicas, status, now)
		if err != nil || wait > 0 {
			if err == nil && !equality.Semantic.DeepEqual(written, status) {
				err = e.writeStatus(ctx, job, base, status, now)
			}
			return reconcile.Result{RequeueAfter: wait}, err
		}
		written = status.DeepCopy()
		base = job.DeepCopyObject().(ctrl.Object)
	}

	// Decisions (a counted restart, the job's outcome) are written before they are acted on:
	// a restart is counted in status before its pod is deleted, so an operator killed in between
	// neither loses nor doubles it.
	var events []event
	if !finished(status) {
		events = e.decide(job, replicas, policy, status, now)
	}
	// Every decision comes with an event; without one, nothing needs writing before acting,
	// and the status goes out once, at the end.
	if len(events) > 0 {
		if err := e.writeStatus(ctx, job, base, status, now); err != nil {
			return reconcile.Result{}, err
		}
		written = status.DeepCopy()
		base = job.DeepCopyObject().(ctrl.Object)
		for _, ev := range events {
			e.record(job, ev)
		}
	}

	var result reconcile.Result
	var cleaning, unshown bool
	var refusal *Refusal
	var after []event // recorded once the status that explains them is written
	// While a refused create waits for its next try, nothing is created: a quota that refuses
	// a pod would refuse it again on every pod event.
	waiting := mem.wait(now.Time)
	if finished(status) {
		cleaning, err = e.cleanUp(ctx, job, status, policy, pods, services)
		if err != nil {
			return reconcile.Result{}, err
		}
		deleted, expireIn, err := e.expire(ctx, job, status, policy, now)
		if err != nil || deleted {
			return reconcile.Result{}, err
		}
		result.RequeueAfter = expireIn
	} else {
		if err := e.restart(ctx, replicas, status); err != nil {
			return reconcile.Result{}, err
		}
		result.RequeueAfter = deadlineLeft(status, policy, now)
		if waiting == 0 {
			created, wait, r, err := e.create(ctx, job, cluster, replicas)
			if err != nil {
				return reconcile.Result{}, err
			}
			if created != "" {
				e.record(job, event{kind: corev1.EventTypeNormal, reason: "Created", action: "Create", note: created})
			}
			if r != nil && r.Permanent {
				return e.failNow(ctx, job, base, status, r.Reason, r.Error(), now)
			}
			refusal = r
			unshown = created != "" || wait > 0
			result.RequeueAfter = soonest(result.RequeueAfter, wait)
		}
	}

	// A framework's extras (TensorBoard) stay after the job ended, so results can be looked at.
	if ext, ok := e.Framework.(Extension); ok && waiting == 0 && refusal == nil {
		if refusal, err = e.reconcileExtras(ctx, ext, job, status); err != nil {
			return reconcile.Result{}, err
		}
	}

	switch {
	case waiting > 0:
		result.RequeueAfter = soonest(result.RequeueAfter, waiting)
	case refusal != nil:
		retry := mem.failed(now.Time)
		if ev := reportRefusal(status, refusal, retry, now); ev != nil {
			after = append(after, *ev)
		}
		result.RequeueAfter = soonest(result.RequeueAfter, retry)
		// The refusal is worth writing now, partial view or not: the next reconciles skip the
		// creates that would find it again.
		unshown = false
	default:
		mem.passed()
		clearRefusal(status, now)
	}

	var mounts map[types.UID]stuck
	if !finished(status) {
		var lookAgain time.Duration
		if mounts, lookAgain, err = e.mountFailures(ctx, job.GetNamespace(), mem, replicas, now.Time); err != nil {
			return reconcile.Result{}, err
		}
		result.RequeueAfter = soonest(result.RequeueAfter, lookAgain)
	}
	summarize(e.Framework.Kind().Container, groups, replicas, status, cleaning, mounts, now)
	// Until the cache shows every pod and service this process created, the status would be
	// written from a partial view, and written again moments later: the status worth writing
	// comes with the reconciles their watch events bring, a few milliseconds later.
	if !equality.Semantic.DeepEqual(written, status) && !unshown {
		if wait := holdBack(mem, written, status, now); wait > 0 {
			result.RequeueAfter = soonest(result.RequeueAfter, wait)
		} else if err := e.writeStatus(ctx, job, base, status, now); err != nil {
			return reconcile.Result{}, err
		} else if ev := waitingEvent(written, status); ev != nil {
			after = append(after, *ev)
		}
	}
	for _, ev := range after {
		e.record(job, ev)
	}
	return result, nil
}

// failNow ends the job at once for a reason no retry can fix, says why in status and an event.
func (e *Reconciler) failNow(ctx context.Context, job, base ctrl.Object, status *v1beta1.JobStatus, reason, msg string, now metav1.Time) (reconcile.Result, error) {
	fail(status, reason, msg, now)
	if err := e.writeStatus(ctx, job, base, status, now); err != nil {
		return reconcile.Result{}, err
	}
	e.record(job, event{kind: corev1.EventTypeWarning, reason: reason, action: "Create", note: msg})
	// Reconciled again by its own status write: clean-up goes on from there.
	return reconcile.Result{}, nil
}

func (e *Reconciler) reader() ctrl.Reader {
	if e.Reader != nil {
		return e.Reader
	}
	return e.Client
}

func (e *Reconciler) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// observe lists the job's pods and services and pairs them with the replicas the spec asks for.
// perReplica says the job has the older layout, a service per replica (services.go): an older
// operator started it.
func (e *Reconciler) observe(ctx context.Context, job ctrl.Object, groups []Replica) (replicas []*replica, pods map[string]*corev1.Pod, services map[string]*corev1.Service, perReplica bool, err error) {
	// By the owner index: a cache lookup of this job's objects, not a scan of the namespace
	// (which would make a thousand jobs cost a million comparisons per round). Replica pods
	// only, and the job's services: a framework's extras (TensorBoard) are owned by the job too.
	owned := []ctrl.ListOption{ctrl.InNamespace(job.GetNamespace()), ctrl.MatchingFields{OwnerIndex: string(job.GetUID())}}
	var podList corev1.PodList
	if err := e.Client.List(ctx, &podList, append(owned, ctrl.HasLabels{LabelReplicaType})...); err != nil {
		return nil, nil, nil, false, err
	}
	var svcList corev1.ServiceList
	if err := e.Client.List(ctx, &svcList, owned...); err != nil {
		return nil, nil, nil, false, err
	}
	pods = map[string]*corev1.Pod{}
	for i := range podList.Items {
		if p := &podList.Items[i]; ownedBy(p, job.GetUID()) {
			pods[p.Name] = p
		}
	}
	services = map[string]*corev1.Service{}
	jobService := JobServiceName(job.GetName())
	for i := range svcList.Items {
		s := &svcList.Items[i]
		if !ownedBy(s, job.GetUID()) {
			continue
		}
		if !replicaObject(s, job) {
			continue // a framework's extra
		}
		if s.Name != jobService {
			perReplica = true
		}
		services[s.Name] = s
	}
	_, shown := services[jobService]
	for _, g := range groups {
		for i := 0; i < int(g.Replicas); i++ {
			r := &replica{group: g, index: i, name: ReplicaName(job.GetName(), g.Type, i)}
			r.pod = pods[r.name]
			r.service = shown
			if perReplica {
				_, r.service = services[r.name]
			}
			if r.pod != nil {
				r.verdict = Judge(r.pod, e.Framework.Kind().Container, g.RestartPolicy)
			}
			replicas = append(replicas, r)
		}
	}
	return replicas, pods, services, perReplica, nil
}

func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
}

// createFanOut is how many creates of one job are in flight at once. A job's pods and services
// do not depend on each other, and creating them one by one would make a large job's start
// time the sum of its round trips.
const createFanOut = 16

// create makes the pods and services that are missing. It returns a line for the event that
// sums up what it created (one event per reconcile, not one per object), how soon to look
// again when it left out objects it created before that the cache does not show yet, and the
// apiserver's refusal of an object, if any (refusals.go).
func (e *Reconciler) create(ctx context.Context, job v1beta1.Job, cluster Cluster, replicas []*replica) (string, time.Duration, *Refusal, error) {
	now := e.now()
	unseen := e.jobs.of(job)
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

// OwnerIndex is the cache index of pods and services by the UID of their controlling owner.
const OwnerIndex = "mlkube.io/controller-uid"

// IndexOwners registers OwnerIndex with the manager's cache for pods, services and the
// frameworks' extra types; once per manager, before it starts.
func IndexOwners(ctx context.Context, mgr manager.Manager, extraTypes ...ctrl.Object) error {
	byOwner := func(obj ctrl.Object) []string {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}
	indexed := map[string]bool{}
	for _, obj := range append([]ctrl.Object{&corev1.Pod{}, &corev1.Service{}}, extraTypes...) {
		// An extra of a type already indexed (TensorBoard's Service) is indexed once.
		t := fmt.Sprintf("%T", obj)
		if indexed[t] {
			continue
		}
		indexed[t] = true
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, OwnerIndex, byOwner); err != nil {
			return err
		}
	}
	return nil
}
