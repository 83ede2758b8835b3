package replicajob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// observe begins a pass: it reads the job and its memory, checks the job once (cluster.go),
// and lists its pods and services. It returns nil when there is nothing to reconcile: the job
// is gone, or going.
func (e *Reconciler) observe(ctx context.Context, req reconcile.Request) (*pass, error) {
	job := e.Framework.Kind().New()
	if err := e.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			e.jobs.forget(req.NamespacedName)
		}
		return nil, ctrl.IgnoreNotFound(err)
	}
	if !job.GetDeletionTimestamp().IsZero() {
		return nil, nil
	}
	p := &pass{job: job, mem: e.jobs.of(job), now: metav1.NewTime(e.now()), status: job.JobStatus()}
	p.snapshot()
	if p.unreadable = job.Unreadable(); p.unreadable != "" {
		p.mem.countUnreadable(e.Framework.Kind().Name, job.GetNamespace())
		return p, nil
	}
	p.mem.readable()
	p.groups, p.policy = job.Groups(), job.Policy()
	var err error
	if p.queue, err = e.observeQueue(ctx, job); err != nil {
		return nil, err
	}
	// A job that breaks its CRD's rules or that no container could start with fails before
	// anything is built for it.
	if !finished(p.status) {
		if p.cluster, p.invalid = e.resolve(ctx, job, p.mem); p.invalid != nil {
			return p, nil
		}
	}
	var perReplica bool
	if p.replicas, p.pods, p.services, perReplica, err = e.listReplicas(ctx, job, p.groups); err != nil {
		return nil, err
	}
	if perReplica {
		p.cluster = withServicePerReplica(p.cluster, job)
	}
	return p, nil
}

// listReplicas lists the job's pods and services and pairs them with the replicas the spec asks for.
// perReplica says the job has the older layout, a service per replica (services.go): an older
// operator started it.
func (e *Reconciler) listReplicas(ctx context.Context, job ctrl.Object, groups []Replica) (replicas []*replica, pods map[string]*corev1.Pod, services map[string]*corev1.Service, perReplica bool, err error) {
	// By the owner index: a cache lookup of this job's objects, not a scan of the namespace
	// (which would make a thousand jobs cost a million comparisons per round). Replica pods
	// only, and the job's services: a framework's extras (TensorBoard) are owned by the job too.
	owned := []ctrl.ListOption{ctrl.InNamespace(job.GetNamespace()), ctrl.MatchingFields{OwnerIndex: string(job.GetUID())}}
	var podList corev1.PodList
	if err := e.Client.List(ctx, &podList, append(owned, ctrl.HasLabels{v1beta1.LabelReplicaType})...); err != nil {
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
