package kube

import (
	"context"
	"errors"
	"net"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestJobFromKeepsOnlyWhatIsShown(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mlkube.io/v1beta1", "kind": "TfJob",
		"metadata": map[string]any{
			"name": "mnist", "namespace": "team-a", "uid": "u1", "resourceVersion": "7",
			"creationTimestamp": "2026-11-21T21:23:45Z",
			"annotations":       map[string]any{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)},
			"managedFields":     []any{map[string]any{"manager": "kubectl"}},
		},
		"spec": map[string]any{"replicaSpecs": []any{map[string]any{"tfReplicaType": "MASTER"}}},
		"status": map[string]any{
			"state": "Running", "phase": "Running", "replicas": "master 1/1 worker 2/2 ps 2/2", "restarts": int64(2),
			"conditions": []any{map[string]any{"type": "Created", "status": "True", "reason": "ReplicasCreated",
				"message": "created 5 pods and their services", "lastTransitionTime": "2026-11-21T21:23:46Z"}},
			"tensorboard": map[string]any{"serviceName": "mnist-tensorboard", "url": "http://mnist-tensorboard.team-a.svc",
				"proxyPath": "/api/v1/namespaces/team-a/services/mnist-tensorboard:80/proxy/", "ready": true},
		},
	}}
	j := JobFrom("TfJob", u)
	if j.Unreadable != "" {
		t.Fatalf("a readable job is marked unreadable: %s", j.Unreadable)
	}
	if j.Name != "mnist" || j.Namespace != "team-a" || j.ResourceVersion != "7" || j.CreationTimestamp.IsZero() {
		t.Fatalf("metadata not kept: %+v", j.ObjectMeta)
	}
	if j.Annotations != nil || j.ManagedFields != nil || j.Labels != nil {
		t.Fatalf("metadata not trimmed: %+v", j.ObjectMeta)
	}
	if j.State != "Running" || j.Replicas != "master 1/1 worker 2/2 ps 2/2" || j.Restarts != 2 {
		t.Fatalf("status: %+v", j)
	}
	if len(j.Conditions) != 1 || j.Conditions[0].Reason != "ReplicasCreated" {
		t.Fatalf("conditions: %+v", j.Conditions)
	}
	if j.Tensorboard == nil || !j.Tensorboard.Ready || j.Tensorboard.ProxyPath == "" {
		t.Fatalf("tensorboard: %+v", j.Tensorboard)
	}
	if k := j.Key(); k != (JobKey{"TfJob", "team-a", "mnist"}) {
		t.Fatalf("key %+v", k)
	}
	// client-go may hand a stored row to the transform again: it must come back as it is.
	again, err := jobTransform("TfJob")(j)
	if err != nil || again != any(j) {
		t.Fatalf("transform is not idempotent: %v %v", again, err)
	}
}

func TestJobFromWithoutStatus(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "new", "namespace": "ns"}}}
	j := JobFrom("MXJob", u)
	if j.State != "" || j.Kind != "MXJob" || j.Unreadable != "" {
		t.Fatalf("%+v", j)
	}
}

// A job the Go types cannot read whole is a row that says which field, never an error: the
// transform's error would fail the list of every job of its kind. Its status is kept when
// that reads.
func TestJobFromAnUnreadableJob(t *testing.T) {
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			badSpec := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "mlkube.io/v1beta1", "kind": k.Name,
				"metadata": map[string]any{"name": "old", "namespace": "team-a", "uid": "u1"},
				"spec":     map[string]any{"runPolicy": map[string]any{"ttlSecondsAfterFinished": int64(2592000000)}},
				"status":   map[string]any{"state": "Running", "replicas": "worker 2/2", "restarts": int64(3)},
			}}
			j, err := jobTransform(k.Name)(badSpec)
			if err != nil {
				t.Fatalf("the transform failed (and with it the list of every %s): %v", k.Name, err)
			}
			row := j.(*Job)
			if want := "spec.runPolicy.ttlSecondsAfterFinished: number 2592000000 does not fit int32"; row.Unreadable != want {
				t.Errorf("Unreadable = %q, want %q", row.Unreadable, want)
			}
			if row.Name != "old" || row.UID != "u1" || row.State != "Running" || row.Replicas != "worker 2/2" || row.Restarts != 3 {
				t.Errorf("metadata or status lost: %+v", row)
			}

			badStatus := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "mlkube.io/v1beta1", "kind": k.Name,
				"metadata": map[string]any{"name": "odd", "namespace": "team-a"},
				"status":   map[string]any{"state": "Running", "restarts": int64(99999999999)},
			}}
			j, err = jobTransform(k.Name)(badStatus)
			if err != nil {
				t.Fatalf("the transform failed on a status it cannot read: %v", err)
			}
			if row := j.(*Job); row.Name != "odd" || !strings.Contains(row.Unreadable, "status.restarts: number 99999999999 does not fit int32") {
				t.Errorf("a status that does not read: %+v", row)
			}
		})
	}
}

func TestReplicaFrom(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist-worker-1", Namespace: "team-a", Labels: map[string]string{
			v1beta1.LabelJobName: "mnist", v1beta1.LabelReplicaType: "worker", v1beta1.LabelReplicaIndex: "1", "app": "x",
		}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{
			{Name: "sidecar", Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: strings.Repeat("y", 1000)}}}, {Name: "tensorflow"},
		}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar", RestartCount: 9},
				{Name: "tensorflow", RestartCount: 2, ContainerID: "containerd://abc",
					State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}},
			},
		},
	}
	r := ReplicaFrom(p)
	want := Replica{Type: "worker", Index: 1, Phase: "Running", Ready: true, Container: "tensorflow", ContainerID: "containerd://abc",
		Running: true, Exited: true, ExitCode: 137, ExitReason: "OOMKilled", Restarts: 2, Node: "node-1"}
	got := *r
	got.ObjectMeta, got.Containers = metav1.ObjectMeta{}, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if r.Labels != nil || r.ManagedFields != nil {
		t.Fatal("pod metadata not trimmed")
	}

	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p.Spec.Containers[1].Name = "trainer" // no kind's container: the first decides
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}
	r = ReplicaFrom(p)
	if r.Phase != "Terminating" || r.Container != "sidecar" || r.Exited {
		t.Fatalf("%+v", r)
	}
}

func TestEventFrom(t *testing.T) {
	at := time.Date(2026, 11, 21, 21, 23, 46, 0, time.UTC)
	e := EventFrom(&eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist.1"}, Type: "Warning", Reason: "Restarting", Note: "pod x exited",
		Regarding: corev1.ObjectReference{UID: "u1"},
		Series:    &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(at)},
	})
	if e.Count != 3 || !e.Last.Equal(at) || e.RegardingUID != "u1" || e.Reason != "Restarting" {
		t.Fatalf("%+v", e)
	}
	e = EventFrom(&eventsv1.Event{EventTime: metav1.NewMicroTime(at)})
	if e.Count != 1 || !e.Last.Equal(at) {
		t.Fatalf("%+v", e)
	}
}

// A burst is coalesced into one batch; a message after a quiet spell comes at once.
func TestFeedCoalesces(t *testing.T) {
	f := NewFeed(30 * time.Millisecond)
	ctx := context.Background()
	f.Send(1)
	start := time.Now()
	b, ok := f.Next(ctx)
	if !ok || len(b.Msgs) != 1 {
		t.Fatalf("first batch %+v", b)
	}
	if waited := time.Since(start); waited > 20*time.Millisecond {
		t.Fatalf("a lone message waited %s", waited)
	}
	for i := 0; i < 100; i++ {
		f.Send(i)
	}
	b, _ = f.Next(ctx)
	if len(b.Msgs) != 100 {
		t.Fatalf("a burst of 100 came as %d", len(b.Msgs))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := f.Next(cctx); ok {
		t.Fatal("Next after the context ended returned a batch")
	}
}

func TestExplain(t *testing.T) {
	gr := schema.GroupResource{Group: "mlkube.io", Resource: "tfjobs"}
	need := Access{Verbs: []string{"list", "watch"}, Resource: "tfjobs.mlkube.io", Namespace: "team-a"}
	err := Explain(apierrors.NewForbidden(gr, "", errors.New(`User "viewer" cannot list resource "tfjobs"`)), need, "https://x")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "you need list, watch on tfjobs.mlkube.io in namespace team-a") {
		t.Fatalf("forbidden: %v", err)
	}
	need.Namespace = ""
	err = Explain(apierrors.NewForbidden(gr, "", errors.New("no")), need, "https://x")
	if !strings.Contains(err.Error(), "cluster-wide") || !strings.Contains(err.Error(), "-n NAMESPACE") {
		t.Fatalf("forbidden cluster-wide: %v", err)
	}
	err = Explain(apierrors.NewUnauthorized("expired"), need, "https://x")
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unauthorized: %v", err)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	err = Explain(&url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis", Err: refused}, need, "https://127.0.0.1:6443")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "devctl up") {
		t.Fatalf("unreachable: %v", err)
	}
	nf := apierrors.NewNotFound(gr, "x")
	if err := Explain(nf, need, ""); err != error(nf) {
		t.Fatalf("other API errors must pass as they are: %v", err)
	}
}
