package replicajob

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A framework's extras (TfJob's TensorBoard) are made the way replicas are: owned by the job,
// with the job's labels, created once (the unseen record keeps a lagging cache from creating
// them twice), refusals reported in status and events. They stay after the job ended, so
// results can still be looked at, and go with the job; the ones a job no longer asks for (its
// spec.tensorboard removed) are deleted.

// reconcileExtras brings the job's extras to what the framework asks for. A create the
// apiserver refuses comes back as a refusal; other errors as errors.
func (e *Reconciler) reconcileExtras(ctx context.Context, ext Extension, job v1beta1.Job, status *v1beta1.JobStatus) (*Refusal, error) {
	now := e.now()
	kind := e.Framework.Kind().Name
	unseen := e.jobs.of(job)
	shown, err := e.shownExtras(ctx, ext, job)
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for _, obj := range ext.Extras(job) {
		key := kindName(obj) + "/" + obj.GetName()
		wanted[key] = true
		if _, ok := shown[key]; ok {
			unseen.seen(key)
			continue
		}
		if unseen.pending(key, now) > 0 {
			continue
		}
		obj.SetNamespace(job.GetNamespace())
		obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef(kind, job)})
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1beta1.LabelJobName], labels[v1beta1.LabelJobKind] = job.GetName(), strings.ToLower(kind)
		obj.SetLabels(labels)
		if err := e.Client.Create(ctx, obj); err != nil {
			if r := refuse(ctx, e.reader(), job, obj, ext.ExtrasHint(), err); r != nil {
				r.Permanent = false // the training needs no extra: the job runs on
				return r, nil
			}
			continue
		}
		unseen.add(key, now)
	}
	for key, obj := range shown {
		if wanted[key] {
			continue
		}
		if err := e.Client.Delete(ctx, obj, ctrl.Preconditions{UID: ptrUID(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("deleting %s, which the job no longer asks for: %w", key, err)
		}
		delete(shown, key)
	}
	ext.ExtrasStatus(job, shown, status)
	return nil, nil
}

// shownExtras lists, by "kind/name", the job's extras the cache shows: the objects of the
// extras' types the job controls that are no replica's.
func (e *Reconciler) shownExtras(ctx context.Context, ext Extension, job v1beta1.Job) (map[string]ctrl.Object, error) {
	shown := map[string]ctrl.Object{}
	for _, typ := range ext.ExtraTypes() {
		list, err := newListFor(e.Client, typ)
		if err != nil {
			return nil, err
		}
		if err := e.Client.List(ctx, list, ctrl.InNamespace(job.GetNamespace()), ctrl.MatchingFields{OwnerIndex: string(job.GetUID())}); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj, ok := item.(ctrl.Object)
			if !ok || !ownedBy(obj, job.GetUID()) {
				continue
			}
			if replicaObject(obj, job) {
				continue
			}
			shown[kindName(obj)+"/"+obj.GetName()] = obj
		}
	}
	return shown, nil
}

// newListFor makes an empty list of obj's kind, through the client's scheme.
func newListFor(c ctrl.Client, obj ctrl.Object) (ctrl.ObjectList, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, err
	}
	gvk.Kind += "List"
	list, err := c.Scheme().New(gvk)
	if err != nil {
		return nil, err
	}
	return list.(ctrl.ObjectList), nil
}

func ptrUID(uid types.UID) *types.UID { return &uid }
