package kueue

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=localqueues,verbs=get;list;watch

// Waits tells the engine why a queued job waits, from its Workload as Kueue wrote it: the
// Workload's own words (Kueue's reason for not admitting it, or for evicting it) and the queue.
type Waits struct {
	// Reader reads Workloads by the owner index Setup registers, and LocalQueues.
	Reader client.Reader
}

var _ replicajob.Queue = Waits{}

// Object is the Workload, which the job owns.
func (Waits) Object() client.Object { return &kueue.Workload{} }

// Wait says what Kueue says of job: reason Queued, Evicted or Admitted, and a message naming
// the LocalQueue and ClusterQueue and Kueue's own words.
func (w Waits) Wait(ctx context.Context, k *v1beta1.Kind, job v1beta1.Job) (string, string, error) {
	lq := job.GetLabels()[replicajob.QueueLabel]
	if errs := jobframework.ValidateQueueName(job); len(errs) > 0 {
		// Kueue's own webhooks refuse such a label on the kinds they serve; no LocalQueue can
		// have the name, so the job would wait for one that cannot be created.
		return replicajob.ReasonQueued, fmt.Sprintf("the job's label %s is %q, which no LocalQueue can be named (%s): it waits for ever; "+
			"delete the job and create it again naming an existing queue (kubectl get localqueues -n %s)",
			replicajob.QueueLabel, lq, errs.ToAggregate().Error(), job.GetNamespace()), nil
	}
	where := fmt.Sprintf("LocalQueue %q", lq)
	var q kueue.LocalQueue
	switch err := w.Reader.Get(ctx, client.ObjectKey{Namespace: job.GetNamespace(), Name: lq}, &q); {
	case err == nil:
		where += fmt.Sprintf(" (ClusterQueue %q)", q.Spec.ClusterQueue)
	case client.IgnoreNotFound(err) != nil:
		return "", "", err
	default:
		return replicajob.ReasonQueued, fmt.Sprintf("waiting for Kueue: the job names %s (label %s), which namespace %s does not have: "+
			"create it, or name an existing one (kubectl get localqueues -n %s)", where, replicajob.QueueLabel, job.GetNamespace(), job.GetNamespace()), nil
	}
	var list kueue.WorkloadList
	if err := w.Reader.List(ctx, &list, client.InNamespace(job.GetNamespace()),
		jobframework.OwnerReferenceIndexFieldMatcher(v1beta1.GroupVersion.WithKind(k.Name), job.GetName())); err != nil {
		return "", "", err
	}
	wl := current(&list, job)
	if wl == nil {
		return replicajob.ReasonQueued, fmt.Sprintf("queued in %s: waiting for Kueue to take the job in (its Workload is not made yet)", where), nil
	}
	conds := wl.Status.Conditions
	if c := apimeta.FindStatusCondition(conds, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		return replicajob.ReasonEvicted, fmt.Sprintf("evicted by Kueue from %s (%s): %s; its pods are deleted and it waits to be admitted again", where, c.Reason, c.Message), nil
	}
	if c := apimeta.FindStatusCondition(conds, kueue.WorkloadRequeued); c != nil && c.Status == metav1.ConditionFalse {
		return replicajob.ReasonEvicted, fmt.Sprintf("evicted by Kueue from %s, and held back before it is queued again (%s): %s", where, c.Reason, c.Message), nil
	}
	if apimeta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) {
		return replicajob.ReasonAdmitted, fmt.Sprintf("admitted by Kueue in %s: starting", where), nil
	}
	if c := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved); c != nil && c.Message != "" {
		return replicajob.ReasonQueued, fmt.Sprintf("queued in %s, waiting for quota: %s", where, c.Message), nil
	}
	return replicajob.ReasonQueued, fmt.Sprintf("queued in %s: Kueue has not decided yet (Workload %s)", where, wl.Name), nil
}

// current is the job's Workload that is not finished, the newest if several (a job re-queued
// after its Workload was deleted).
func current(list *kueue.WorkloadList, job v1beta1.Job) *kueue.Workload {
	var out *kueue.Workload
	for i := range list.Items {
		wl := &list.Items[i]
		if !metav1.IsControlledBy(wl, job) || apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
			continue
		}
		if out == nil || out.CreationTimestamp.Before(&wl.CreationTimestamp) {
			out = wl
		}
	}
	return out
}
