package kube

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/eventtime"
)

// The transforms run on every object a watch receives, before the informer stores it. They
// must accept their own output: client-go may pass an object it already holds through again.

func jobTransform(kind string) func(any) (any, error) {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *Job:
			return o, nil
		case *unstructured.Unstructured:
			return JobFrom(kind, o), nil
		}
		return obj, nil
	}
}

// JobFrom makes the row of a job object: its metadata and status, and whether the operator and
// devctl can read it (Unreadable). It never fails: a transform's error would fail the list of
// every job of the kind, over and over, so a job that cannot be read is a row that says so.
// The spec, with its pod templates, is not kept.
func JobFrom(kind string, u *unstructured.Unstructured) *Job {
	j := &Job{ObjectMeta: meta(u), Kind: kind}
	st, why := readJob(kind, u)
	j.Unreadable = why
	j.State, j.Phase = string(st.State), string(st.Phase)
	j.Replicas, j.Restarts = st.Replicas, st.Restarts
	for _, c := range st.Conditions {
		j.Conditions = append(j.Conditions, Condition{
			Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransition: c.LastTransitionTime.Time,
		})
	}
	if tb := st.Tensorboard; tb != nil {
		j.Tensorboard = &Tensorboard{ServiceName: tb.ServiceName, URL: tb.URL, ProxyPath: tb.ProxyPath, Ready: tb.Ready}
	}
	return j
}

// readJob decodes the object into its kind's Go type, as the operator and devctl do, and
// returns its status and why it could not be read whole ("" when it could). An unreadable job
// keeps the status when that reads (v1beta1.Job.Unreadable).
func readJob(kind string, u *unstructured.Unstructured) (v1beta1.JobStatus, string) {
	k := v1beta1.KindNamed(kind)
	if k == nil {
		return v1beta1.JobStatus{}, "tfjob-tui does not know the kind " + kind
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return v1beta1.JobStatus{}, "cannot encode it again: " + err.Error()
	}
	job := k.New()
	if err := json.Unmarshal(data, job); err != nil {
		return v1beta1.JobStatus{}, err.Error()
	}
	return *job.JobStatus(), job.Unreadable()
}

func replicaTransform(container string) func(any) (any, error) {
	return func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return ReplicaFrom(p, container), nil
		}
		return obj, nil
	}
}

// ReplicaFrom makes the row of a replica pod; container is the kind's main container.
func ReplicaFrom(p *corev1.Pod, container string) *Replica {
	r := &Replica{
		ObjectMeta: meta(p),
		Type:       p.Labels[v1beta1.LabelReplicaType],
		Index:      -1,
		Phase:      string(p.Status.Phase),
		Node:       p.Spec.NodeName,
	}
	if _, i, ok := v1beta1.ReplicaOf(p.Labels); ok {
		r.Index = i
	}
	if p.DeletionTimestamp != nil {
		r.Phase = "Terminating"
	}
	if owner := metav1.GetControllerOf(p); owner != nil {
		r.Controller = owner.UID
	}
	for _, c := range p.Spec.Containers {
		r.Containers = append(r.Containers, c.Name)
	}
	r.Container = container
	if len(r.Containers) > 0 && !contains(r.Containers, container) {
		r.Container = r.Containers[0]
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != r.Container {
			continue
		}
		r.Restarts = cs.RestartCount
		r.ContainerID = cs.ContainerID
		r.Running = cs.State.Running != nil
		if w := cs.State.Waiting; w != nil {
			r.Waiting = w.Reason
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			r.Exited, r.ExitCode, r.ExitReason = true, t.ExitCode, t.Reason
		}
	}
	return r
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func eventTransform(obj any) (any, error) {
	if e, ok := obj.(*eventsv1.Event); ok {
		return EventFrom(e), nil
	}
	return obj, nil
}

// EventFrom makes the row of an event.
func EventFrom(e *eventsv1.Event) *Event {
	r := &Event{
		ObjectMeta:   meta(e),
		RegardingUID: string(e.Regarding.UID),
		Type:         e.Type,
		Reason:       e.Reason,
		Note:         e.Note,
	}
	r.Last, r.Count = eventtime.Last(e)
	return r
}

var _ metav1.Object = &Job{}
