package kube

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mlkube/mlkube/internal/jobwatch"
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

// JobFrom makes the row of a job object (see jobRow). The watches decode rows straight from
// the apiserver's JSON (jobCodec); this is the same for an object already decoded.
func JobFrom(kind string, u *unstructured.Unstructured) *Job {
	k := v1beta1.KindNamed(kind)
	if k == nil {
		return &Job{ObjectMeta: meta(u), Kind: kind, Unreadable: "tfjob-tui does not know the kind " + kind}
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return &Job{ObjectMeta: meta(u), Kind: kind, Unreadable: "cannot encode it again: " + err.Error()}
	}
	job, err := decodeJob(k, data)
	if err != nil {
		return &Job{ObjectMeta: meta(u), Kind: kind, Unreadable: err.Error()}
	}
	return jobRow(kind, job)
}

// jobRow makes the row of a job decoded into its kind's Go type: its metadata and status, and
// whether the operator and devctl can read it (Unreadable). A job that cannot be read is a row
// that says so, never an error: an error would fail the list of every job of the kind, over
// and over. The spec, with its pod templates, is not kept.
func jobRow(kind string, job v1beta1.Job) *Job {
	j := &Job{ObjectMeta: meta(job), Kind: kind, Unreadable: job.Unreadable()}
	if job.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
		// The bookmark that ends a watch's initial events: the reflector looks for this.
		j.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	st := job.JobStatus()
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
	// Kept as decoded: each is an object of its own, and what the row holds of the job goes
	// with the rest. A first failure's last words (at most 2 KiB) are the view's to show.
	j.Progress, j.FirstFailure, j.Stalls = st.Progress, st.FirstFailure, st.Stalls
	return j
}

func replicaTransform(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return ReplicaFrom(p), nil
	}
	return obj, nil
}

// ReplicaFrom makes the row of a replica pod. Its state is that of the container that decides
// the replica (jobwatch.Container), whose log the log pane shows first.
func ReplicaFrom(p *corev1.Pod) *Replica {
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
	r.Container = jobwatch.Container(p)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.Ready = c.Status == corev1.ConditionTrue
		}
	}
	if cs := jobwatch.ContainerStatus(p); cs != nil {
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
