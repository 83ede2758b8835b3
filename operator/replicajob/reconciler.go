package replicajob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

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
	// Queue, when set, says why a job labelled for Kueue waits (queued.go); nil runs the
	// operator without Kueue.
	Queue Queue
	// Admitted, when set, says which jobs the apiserver has already checked against the CRD the
	// operator carries (operator/admitted); the engine checks only the others in process. Nil
	// checks every job.
	Admitted Admitted
	// Progress, when set, is the endpoint the trainers report progress to (progress.go); nil
	// runs jobs without it.
	Progress Progress
	// Pokes, with Progress, are the jobs whose trainers reported: reconciled to take the
	// reports into their status.
	Pokes <-chan ctrlevent.GenericEvent
	// Now is the clock; tests leave it nil.
	Now func() time.Time

	// jobs is what the engine remembers of each job between reconciles (memory.go).
	jobs memories
}

// Admitted says whether the apiserver checked a job, when it stored it, against the very CRD
// the operator carries.
type Admitted interface {
	Checked(ctx context.Context, job v1beta1.Job) bool
}

// SetupWithManager registers the reconciler: it watches its jobs and everything they own.
func (e *Reconciler) SetupWithManager(mgr manager.Manager, opts controller.Options) error {
	b := builder.ControllerManagedBy(mgr).
		Named(e.Framework.Kind().Label()).
		For(e.Framework.Kind().New()).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(e.controllingJob)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(e.controllingJob)).
		WithOptions(opts)
	if ext, ok := e.Framework.(Extension); ok {
		for _, obj := range ext.ExtraTypes() {
			b = b.Owns(obj)
		}
	}
	if e.Queue != nil {
		b = b.Owns(e.Queue.Object())
	}
	if e.Pokes != nil {
		b = b.WatchesRawSource(source.Channel(e.Pokes, &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(e)
}

// controllingJob is the job of this reconciler's kind that controls obj, as Owns would find it,
// without the REST mapping Owns looks up for every event to learn that a job is namespaced
// (5% of what the operator allocated at scale): every kind of ours is.
func (e *Reconciler) controllingJob(_ context.Context, obj ctrl.Object) []reconcile.Request {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != e.Framework.Kind().Name {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1beta1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
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

// pass is one reconcile of one job: what it observed (observe.go), what it decided (decide.go),
// what acting met (act.go), and the status it writes (statuswrite.go).
type pass struct {
	job v1beta1.Job
	mem *memory
	now metav1.Time

	// status is the job's own, changed in place as the pass goes. written is the status as last
	// written (or read), and base the job as it was then: a write patches the difference, under
	// base's resourceVersion.
	status  *v1beta1.JobStatus
	written *v1beta1.JobStatus
	base    ctrl.Object

	// Observed. unreadable names what of the job cannot be decoded (unreadable.go), invalid why
	// its spec cannot run (cluster.go); neither job has its pods and services listed.
	unreadable string
	invalid    error
	groups     []Replica
	policy     v1beta1.RunPolicy
	queue      *queued // the queue a job labelled for Kueue waits in (queued.go)
	cluster    Cluster
	replicas   []*replica
	pods       map[string]*corev1.Pod
	services   map[string]*corev1.Service

	// Decided. reporting is false where the status was decided whole (a failure, a suspension,
	// a resume that waits, an unreadable job): it is written as it is, and no more is done.
	commit    bool
	reporting bool
	doomed    deletions
	expired   bool
	create    bool
	cleaning  bool
	waiting   time.Duration // left of the backoff of a refused create (refusals.go)

	// Met while acting, and by the status written.
	refusal *Refusal
	unshown bool // created objects the cache does not show yet
	gone    bool // the job itself was deleted (ttl.go)
	hold    bool // the status is not written this time (report)
	events  []event
	result  reconcile.Result
}

func (e *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p, err := e.observe(ctx, req)
	if p == nil || err != nil {
		return reconcile.Result{}, err
	}
	e.decide(p)
	// Decisions (a counted restart, the job's outcome, a resume) are written before they are
	// acted on: a restart is counted in status before its pod is deleted, so an operator killed
	// in between neither loses nor doubles it.
	if p.commit {
		if err := e.write(ctx, p); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := e.act(ctx, p); err != nil || p.gone {
		return reconcile.Result{}, err
	}
	if p.reporting {
		if err := e.report(ctx, p); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := e.write(ctx, p); err != nil {
		return reconcile.Result{}, err
	}
	return p.result, nil
}

// flush records the pass's events, once what explains them is written.
func (e *Reconciler) flush(p *pass) {
	for _, ev := range p.events {
		e.record(p.job, ev)
	}
	p.events = nil
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

func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
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
