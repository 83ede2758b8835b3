// Package kueue lets Kueue queue, admit and preempt mlkube jobs of every kind in the kinds
// table. It is an external integration built on Kueue's own jobframework: jobframework creates
// and follows each job's Workload, and calls back here for what is specific to mlkube's jobs (one
// PodSet per replica group, suspend, where admission writes its scheduling directives, when a
// job is finished or its pods ready). Kueue's rules (when to suspend, evict, requeue, what a
// Workload holds) are jobframework's, not restated here.
package kueue

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/podset"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// job is an mlkube job as jobframework sees it.
type job struct {
	kind *v1beta1.Kind
	obj  v1beta1.Job
}

var (
	_ jobframework.GenericJob              = (*job)(nil)
	_ jobframework.JobWithSkip             = (*job)(nil)
	_ jobframework.JobWithPriorityClass    = (*job)(nil)
	_ jobframework.JobWithPodLabelSelector = (*job)(nil)
	_ jobframework.JobWithReclaimablePods  = (*job)(nil)
)

func newJob(k *v1beta1.Kind) *job { return &job{kind: k, obj: k.New()} }

func (j *job) Object() client.Object { return j.obj }

func (j *job) GVK() schema.GroupVersionKind { return v1beta1.GroupVersion.WithKind(j.kind.Name) }

// Skip leaves alone a job the operator cannot read whole (a value stored before the CRD bounded
// it): its spec decoded empty, and an update written from it would erase the user's groups.
func (j *job) Skip(context.Context) bool { return j.obj.Unreadable() != "" }

// IsSuspended is runPolicy.suspend as written. A job with a queue label and no suspend is not
// suspended here, so jobframework suspends it (writes true) before Kueue admits it; the engine
// meanwhile creates none of its pods (replicajob's queued.go).
func (j *job) IsSuspended() bool { return j.obj.Policy().Suspended() }

func (j *job) Suspend() { j.obj.SetSuspend(true) }

// PodSets are the replica groups in spec order, named by their type in lower case (Kueue's
// names are DNS labels). Each pod's replica index label lets topology-aware scheduling rank it.
func (j *job) PodSets(context.Context) ([]kueue.PodSet, error) {
	groups := j.obj.Groups()
	sets := make([]kueue.PodSet, 0, len(groups))
	for _, g := range groups {
		set := kueue.PodSet{
			Name:     kueue.NewPodSetReference(g.Type),
			Template: *g.Template.DeepCopy(),
			Count:    g.Replicas,
		}
		tr, err := jobframework.NewPodSetTopologyRequest(&g.Template.ObjectMeta).
			PodIndexLabel(ptr.To(v1beta1.LabelReplicaIndex)).Build()
		if err != nil {
			return nil, fmt.Errorf("replica group %s: %w", g.Type, err)
		}
		set.TopologyRequest = tr
		sets = append(sets, set)
	}
	return sets, nil
}

// RunWithPodSetsInfo writes what admission decided (the flavor's node labels and tolerations,
// labels, annotations, scheduling gates) into each group's template and resumes the job. The
// CRD lets exactly those template fields change while a job is suspended.
func (j *job) RunWithPodSetsInfo(_ context.Context, infos []podset.PodSetInfo) error {
	groups := j.obj.Groups()
	if len(infos) != len(groups) {
		return podset.BadPodSetsInfoLenError(len(groups), len(infos))
	}
	j.obj.SetSuspend(false)
	for i, g := range groups {
		if err := podset.Merge(&g.Template.ObjectMeta, &g.Template.Spec, infos[i]); err != nil {
			return fmt.Errorf("replica group %s: %w", g.Type, err)
		}
	}
	return nil
}

// RestorePodSetsInfo puts back the templates as they were before admission; true if any changed.
func (j *job) RestorePodSetsInfo(infos []podset.PodSetInfo) bool {
	changed := false
	for i, g := range j.obj.Groups() {
		if i < len(infos) {
			changed = podset.RestorePodSpec(&g.Template.ObjectMeta, &g.Template.Spec, infos[i]) || changed
		}
	}
	return changed
}

// Finished is the engine's verdict: condition Succeeded or Failed.
func (j *job) Finished(context.Context) (string, bool, bool) {
	conds := j.obj.JobStatus().Conditions
	if c := meta.FindStatusCondition(conds, v1beta1.JobSucceeded); c != nil && c.Status == "True" {
		return c.Message, true, true
	}
	if c := meta.FindStatusCondition(conds, v1beta1.JobFailed); c != nil && c.Status == "True" {
		return c.Message, false, true
	}
	return "", true, false
}

// IsActive is whether any replica's pod is still running: an evicted job's quota is released
// only once none is.
func (j *job) IsActive() bool {
	for _, rs := range j.obj.JobStatus().ReplicaStatuses {
		if rs.Active > 0 {
			return true
		}
	}
	return false
}

// PodsReady is Kueue's PodsReady: every group has as many pods ready or succeeded as it has
// replicas.
func (j *job) PodsReady(context.Context) bool {
	got := map[string]int32{}
	for _, rs := range j.obj.JobStatus().ReplicaStatuses {
		got[rs.Type] = rs.Ready + rs.Succeeded
	}
	for _, g := range j.obj.Groups() {
		if got[g.Type] < g.Replicas {
			return false
		}
	}
	return true
}

// ReclaimablePods gives back the quota of groups whose every replica succeeded, as Kueue's own
// integrations do for finished parts of a job.
func (j *job) ReclaimablePods(context.Context) ([]kueue.ReclaimablePod, error) {
	succeeded := map[string]int32{}
	for _, rs := range j.obj.JobStatus().ReplicaStatuses {
		succeeded[rs.Type] = rs.Succeeded
	}
	var out []kueue.ReclaimablePod
	for _, g := range j.obj.Groups() {
		if n := succeeded[g.Type]; n > 0 && n >= g.Replicas {
			out = append(out, kueue.ReclaimablePod{Name: kueue.NewPodSetReference(g.Type), Count: g.Replicas})
		}
	}
	return out, nil
}

// PriorityClass is the first priorityClassName a group's template names.
func (j *job) PriorityClass() string {
	for _, g := range j.obj.Groups() {
		if n := g.Template.Spec.PriorityClassName; n != "" {
			return n
		}
	}
	return ""
}

// PodLabelSelector selects the job's replica pods, the labels the engine gives them.
func (j *job) PodLabelSelector() string {
	return fmt.Sprintf("%s=%s,%s=%s", v1beta1.LabelJobName, j.obj.GetName(), v1beta1.LabelJobKind, j.kind.Label())
}
