package replicajob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What happens when the apiserver refuses an object the operator creates for a job. A refusal
// is never left to the operator's log: it reaches the job's status and its events.
//
//   - Invalid replica pod or service: the replica spec can never work, and replicaSpecs are
//     immutable, so the job fails at once (reason PodInvalid or ServiceInvalid) with the
//     apiserver's message, which names the field.
//   - Another job's pod or service under the same name: the job fails at once (NameClash),
//     naming the other owner. Waiting would be silent and endless.
//   - Anything else (Forbidden by a quota or a policy, a webhook down, the apiserver busy): it
//     may pass later. The CreateRefused condition carries the apiserver's message, a Warning
//     event says the same, and the create is retried with backoff, from 1 s doubling to
//     refusalBackoffMax. The condition turns False once the create succeeds.

// Refusal is an object the apiserver would not create for a job.
type Refusal struct {
	// Kind and Name say which object, e.g. "pod", "tf-worker-0".
	Kind, Name string
	// Reason is a condition reason: PodInvalid, NameClash, Forbidden, ...
	Reason string
	// Permanent refusals fail the job; the others are retried.
	Permanent bool
	Err       error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// refusalBackoffMax bounds the wait between two tries of a refused create: short enough that a
// job starts soon after its quota frees up, long enough to cost the apiserver nothing.
const refusalBackoffMax = time.Minute

// replicaHint ends the message of an Invalid replica pod or service: what the user can do.
const replicaHint = "replicaSpecs cannot change, so fix the template and create the job again"

// refuse classifies the error of creating obj for job; hint says what to do when obj is
// invalid. It reads the object that already holds the name, through reader, to tell a clash
// from this job's own object the cache lags behind on; nil means the create is as good as done.
func refuse(ctx context.Context, reader ctrl.Reader, job ctrl.Object, obj ctrl.Object, hint string, err error) *Refusal {
	kind := kindName(obj)
	r := &Refusal{Kind: kind, Name: obj.GetName(), Err: err}
	switch {
	case apierrors.IsAlreadyExists(err):
		return clash(ctx, reader, job, obj, kind)
	case apierrors.IsInvalid(err):
		r.Reason, r.Permanent = titleCase(kind)+"Invalid", true
		r.Err = fmt.Errorf("the apiserver refused %s %s: %w; %s", kind, obj.GetName(), err, hint)
	default:
		r.Reason = string(apierrors.ReasonForError(err))
		if r.Reason == "" || r.Reason == string(metav1.StatusReasonUnknown) {
			r.Reason = "CreateFailed"
		}
		r.Err = fmt.Errorf("the apiserver refused %s %s: %w", kind, obj.GetName(), err)
	}
	return r
}

// clash tells whose the object holding obj's name is. Ours (the cache has not shown it yet):
// nil. Another live job's, or nobody's: a permanent NameClash. A deleted job's, which the
// garbage collector has yet to remove (a job deleted and created again under the same name):
// a refusal that passes once it is gone.
func clash(ctx context.Context, reader ctrl.Reader, job ctrl.Object, obj ctrl.Object, kind string) *Refusal {
	have := obj.DeepCopyObject().(ctrl.Object)
	if err := reader.Get(ctx, ctrl.ObjectKeyFromObject(obj), have); err != nil {
		if apierrors.IsNotFound(err) {
			err = fmt.Errorf("%s %s existed a moment ago and is gone now", kind, obj.GetName())
		}
		return &Refusal{Kind: kind, Name: obj.GetName(), Reason: "CreateFailed", Err: err}
	}
	ref := metav1.GetControllerOf(have)
	if ref != nil && ref.UID == job.GetUID() {
		return nil
	}
	r := &Refusal{Kind: kind, Name: obj.GetName(), Reason: "NameClash", Permanent: true}
	naming, shared := fmt.Sprintf("replica %ss are named <job>-<type>-<index>", kind), "replica names (<job>-<type>-<index>)"
	if _, isService := obj.(*corev1.Service); isService && obj.GetName() == JobServiceName(job.GetName()) {
		naming, shared = "a job's service is named as the job", "a name"
	}
	if ref == nil {
		r.Err = fmt.Errorf("%s %s already exists and no job owns it: %s; delete it or give this job another name", kind, obj.GetName(), naming)
		return r
	}
	if ownerGone(ctx, reader, have.GetNamespace(), ref) {
		r.Permanent, r.Reason = false, "OwnerDeleted"
		r.Err = fmt.Errorf("%s %s still belongs to %s %s, which was deleted; waiting for the garbage collector to remove it", kind, obj.GetName(), ref.Kind, ref.Name)
		return r
	}
	r.Err = fmt.Errorf("%s %s already exists and belongs to %s %s: two jobs in one namespace cannot share %s; give this job another name", kind, obj.GetName(), ref.Kind, ref.Name, shared)
	return r
}

// ownerGone is true when the owner ref names an object that no longer exists (or exists under a
// new UID). An owner that cannot be read (a kind the operator may not get) is taken as alive.
func ownerGone(ctx context.Context, reader ctrl.Reader, ns string, ref *metav1.OwnerReference) bool {
	owner := &metav1.PartialObjectMetadata{}
	owner.APIVersion, owner.Kind = ref.APIVersion, ref.Kind
	err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, owner)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && owner.UID != ref.UID
}

// firstRefusal picks the refusal to report among a round's errors: a permanent one first, as
// it decides the job. Errors that are no refusals are returned as they are.
func firstRefusal(errs []error) (*Refusal, error) {
	var pick *Refusal
	var other []error
	for _, err := range errs {
		var r *Refusal
		if !errors.As(err, &r) {
			other = append(other, err)
			continue
		}
		if pick == nil || (r.Permanent && !pick.Permanent) {
			pick = r
		}
	}
	if pick != nil {
		return pick, nil
	}
	return nil, errors.Join(other...)
}

// backoff is the retry schedule of one job's refused creates.
type backoff struct {
	next  time.Time
	delay time.Duration
}

// The backoff of a job's refused creates is in its memory (memory.refusal); zero means its
// creates are not waiting.

// wait says how long the job must still wait before its creates are tried again.
func (m *memory) wait(now time.Time) time.Duration {
	return max(0, m.refusal.next.Sub(now))
}

// failed records a refused try and returns how long to wait before the next.
func (m *memory) failed(now time.Time) time.Duration {
	m.refusal.delay = min(max(2*m.refusal.delay, time.Second), refusalBackoffMax)
	m.refusal.next = now.Add(m.refusal.delay)
	return m.refusal.delay
}

// passed clears the backoff once every create went through.
func (m *memory) passed() { m.refusal = backoff{} }

// reportRefusal records a refusal that may pass in the job's status; it returns the event to
// record when the condition is new or says something new.
func reportRefusal(status *v1beta1.JobStatus, r *Refusal, retry time.Duration, now metav1.Time) *event {
	before := meta.FindStatusCondition(status.Conditions, v1beta1.JobCreateRefused)
	var old *metav1.Condition
	if before != nil {
		old = before.DeepCopy()
	}
	msg := r.Error()
	setCondition(status, v1beta1.JobCreateRefused, metav1.ConditionTrue, r.Reason, msg, now)
	if old != nil && old.Status == metav1.ConditionTrue && old.Reason == r.Reason && old.Message == msg {
		return nil
	}
	return &event{kind: corev1.EventTypeWarning, reason: "CreateRefused", action: "Create",
		note: fmt.Sprintf("%s (trying again in %s, then less often)", msg, retry.Round(time.Second))}
}

// clearRefusal turns CreateRefused off once every create went through.
func clearRefusal(status *v1beta1.JobStatus, now metav1.Time) {
	if meta.IsStatusConditionTrue(status.Conditions, v1beta1.JobCreateRefused) {
		setCondition(status, v1beta1.JobCreateRefused, metav1.ConditionFalse, "Created", "every object the job needs was created", now)
	}
}

// kindName is "pod" or "service" for an object of the engine's, or the lower-case kind of a
// framework's extra object.
func kindName(obj ctrl.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "pod"
	case *corev1.Service:
		return "service"
	}
	t := fmt.Sprintf("%T", obj)
	return strings.ToLower(t[strings.LastIndex(t, ".")+1:])
}
