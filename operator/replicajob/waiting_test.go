package replicajob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolsevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"
)

const pullError = `failed to pull and unpack image "example.com/my-trainer:v1": dial tcp: lookup example.com: no such host`

// pullFails plays the kubelet failing to pull a pod's image: at the pull (ErrImagePull) or in
// the back-off that follows, whose message wraps the pull's.
func pullFails(backOff bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		w := &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: pullError}
		if backOff {
			w = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "example.com/my-trainer:v1": ErrImagePull: ` + pullError}
		}
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Waiting: w}, 0)
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Image = "example.com/my-trainer:v1"
		}
	}
}

// A job whose replicas cannot pull their image says so: state Waiting, the Running condition's
// reason ImagePullBackOff and a message naming the replicas and the kubelet's words, one Warning
// event. Once the image is there, it runs.
func TestWaitingJobSaysWhy(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), newJob(ns, "pull", replicaGroup(v1beta1.TfReplicaWorker, 4), replicaGroup(v1beta1.TfReplicaPS, 2))))
	names := []string{"pull-worker-0", "pull-worker-1", "pull-worker-2", "pull-worker-3", "pull-ps-0", "pull-ps-1"}
	waitPods(t, ns, names...)
	kl := kubelet{T: t, NS: ns}
	for i, n := range names {
		kl.Update(n, pullFails(i%2 == 1))
	}
	want := "worker-0..3, ps-0..1: cannot pull example.com/my-trainer:v1: " + pullError
	waitJob(t, ns, "pull", "waiting on the image", func(j *v1beta1.TfJob) error {
		c := condition(j, v1beta1.JobRunning)
		if j.Status.State != v1beta1.JobStateWaiting || c == nil || c.Status != "False" || c.Reason != "ImagePullBackOff" || c.Message != want {
			return errorf("state %s, Running condition %+v; want Waiting, ImagePullBackOff %q", j.Status.State, c, want)
		}
		return nil
	})
	waitEvent(t, ns, "pull", "ImagePullBackOff", want)
	// kubectl get's columns, as the apiserver prints them: the state, and with -o wide the reason.
	if cells := tableRow(t, ns, "tfjobs", "pull"); cells["State"] != "Waiting" || cells["Reason"] != "ImagePullBackOff" {
		t.Errorf("kubectl get tfjob pull -o wide shows %v, want State Waiting and Reason ImagePullBackOff", cells)
	}

	kl.Running(names...)
	waitJob(t, ns, "pull", "running once the image is there", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
}

// While the kubelet retries a pull (ErrImagePull, ImagePullBackOff, ErrImagePull, ...), the
// status is written once, not once per retry. The engine runs on a direct client, each retry
// reconciled, every status write counted.
func TestWaitingIsWrittenOnceNotPerRetry(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	var statusWrites atomic.Int32
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	c := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusWrites.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: "retry"})
		},
	})
	now := time.Now()
	e := &replicajob.Reconciler{Client: c, Framework: tfjob.Framework{}, Recorder: toolsevents.NewFakeRecorder(100),
		Now: func() time.Time { now = now.Add(2 * time.Second); return now }} // past the counts' hold-back
	reconcileOnce := func() {
		t.Helper()
		_, err := e.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "retry"}})
		must(t, err)
	}
	must(t, k8s.Create(ctx, newJob(ns, "retry", replicaGroup(v1beta1.TfReplicaWorker, 2))))
	reconcileOnce() // creates
	reconcileOnce() // sees them
	kl := kubelet{T: t, NS: ns}
	for _, n := range []string{"retry-worker-0", "retry-worker-1"} {
		kl.Update(n, pullFails(false))
	}
	reconcileOnce()
	if j := getJob(t, ns, "retry"); j.Status.State != v1beta1.JobStateWaiting {
		t.Fatalf("state %s, want Waiting", j.Status.State)
	}
	before := statusWrites.Load()
	for retry := range 10 {
		kl.Update(fmt.Sprintf("retry-worker-%d", retry%2), pullFails(retry%4 < 2))
		reconcileOnce()
	}
	if n := statusWrites.Load() - before; n != 0 {
		t.Errorf("%d status writes while the kubelet retried the pull 10 times, want 0", n)
	}
	// Something else to say is written.
	kl.Update("retry-worker-1", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CreateContainerConfigError", Message: `secret "token" not found`}}, 0)
	})
	reconcileOnce()
	if n := statusWrites.Load() - before; n != 1 {
		t.Errorf("%d status writes for a new reason, want 1", n)
	}
	c1 := condition(getJob(t, ns, "retry"), v1beta1.JobRunning)
	if want := "worker-0: cannot pull example.com/my-trainer:v1: " + pullError + `; worker-1: secret "token" not found`; c1.Message != want {
		t.Errorf("message %q, want %q", c1.Message, want)
	}
}

// tableRow is a job's row as kubectl get prints it (the apiserver's Table), by column name.
func tableRow(t *testing.T, ns, plural, name string) map[string]any {
	t.Helper()
	rc, err := rest.RESTClientFor(restConfigFor(cfg))
	must(t, err)
	raw, err := rc.Get().AbsPath("/apis", v1beta1.GroupVersion.Group, v1beta1.GroupVersion.Version, "namespaces", ns, plural, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	must(t, err)
	var table metav1.Table
	must(t, json.Unmarshal(raw, &table))
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows for %s/%s", len(table.Rows), plural, name)
	}
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	return cells
}

// restConfigFor is c set up for a plain REST client.
func restConfigFor(c *rest.Config) *rest.Config {
	out := rest.CopyConfig(c)
	out.GroupVersion = &v1beta1.GroupVersion
	out.APIPath = "/apis"
	out.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return out
}
