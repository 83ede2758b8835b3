package tfjob_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests run the operator against a real kube-apiserver and etcd. There is no kubelet:
// the tests play its part by writing pod statuses (running, exit codes, OOMKilled).

var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	logger := logr.Discard()
	if os.Getenv("MLKUBE_TEST_LOG") != "" {
		logger = zap.New(zap.UseDevMode(true))
	}
	ctrl.SetLogger(logger)
	env, c, err := controlplane.Start()
	if errors.Is(err, controlplane.ErrNoAssets) {
		// Only a plain `go test` gets here; `make test` builds the binaries and requires them.
		noControlPlane = err
		os.Exit(m.Run())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = c
	k8s, err = client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

var nsCounter atomic.Int32

// noControlPlane is why the envtest tests skip when there are no control-plane binaries.
var noControlPlane error

// namespace makes a namespace of the test's own, so tests never see each other's jobs.
func namespace(t *testing.T) string {
	t.Helper()
	if noControlPlane != nil {
		t.Skip(noControlPlane)
	}
	name := fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 60 {
		name = strings.TrimRight(name[:60], "-")
	}
	must(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

// startOperator runs the operator on one namespace until the test ends or stop is called.
func startOperator(t *testing.T, ns string, mutate ...func(*operator.Options)) (stop func()) {
	t.Helper()
	opts := operator.Options{Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0", ManyPerProcess: true}
	for _, m := range mutate {
		m(&opts)
	}
	mgr, err := operator.New(cfg, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once atomic.Bool
	stop = func() {
		if once.Swap(true) {
			return
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator stopped with error: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it returns nil, failing the test with cond's last error.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// replicaGroup is a replica group running a trivial tensorflow container.
func replicaGroup(typ v1beta1.TfReplicaType, replicas int32) v1beta1.TfReplicaSpec {
	return v1beta1.TfReplicaSpec{
		TfReplicaType: typ,
		Replicas:      replicas,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}},
		}},
	}
}

func newJob(ns, name string, groups ...v1beta1.TfReplicaSpec) *v1beta1.TfJob {
	return &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1beta1.TfJobSpec{ReplicaSpecs: groups},
	}
}

// standardJob is 1 master, 2 workers and 2 parameter servers.
func standardJob(ns, name string) *v1beta1.TfJob {
	return newJob(ns, name,
		replicaGroup(v1beta1.TfReplicaMaster, 1),
		replicaGroup(v1beta1.TfReplicaWorker, 2),
		replicaGroup(v1beta1.TfReplicaPS, 2))
}

func getJob(t *testing.T, ns, name string) *v1beta1.TfJob {
	t.Helper()
	var job v1beta1.TfJob
	must(t, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &job))
	return &job
}

func listPods(t *testing.T, ns string) map[string]corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	must(t, k8s.List(context.Background(), &pods, client.InNamespace(ns)))
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		out[p.Name] = p
	}
	return out
}

func listServices(t *testing.T, ns string) map[string]corev1.Service {
	t.Helper()
	var svcs corev1.ServiceList
	must(t, k8s.List(context.Background(), &svcs, client.InNamespace(ns)))
	out := map[string]corev1.Service{}
	for _, s := range svcs.Items {
		out[s.Name] = s
	}
	return out
}

// waitPods waits until exactly the named pods exist.
func waitPods(t *testing.T, ns string, names ...string) map[string]corev1.Pod {
	t.Helper()
	var pods map[string]corev1.Pod
	eventually(t, "pods "+strings.Join(names, ","), func() error {
		pods = listPods(t, ns)
		for _, n := range names {
			if _, ok := pods[n]; !ok {
				return fmt.Errorf("pod %s missing; have %d pods", n, len(pods))
			}
		}
		if len(pods) != len(names) {
			return fmt.Errorf("want %d pods, have %d", len(names), len(pods))
		}
		return nil
	})
	return pods
}

// kubelet plays the kubelet's part for one pod: it writes the status a real one would.
type kubelet struct {
	t  *testing.T
	ns string
}

func (k kubelet) update(name string, mutate func(*corev1.Pod)) {
	k.t.Helper()
	err := retry(func() error {
		var pod corev1.Pod
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: k.ns, Name: name}, &pod); err != nil {
			return err
		}
		mutate(&pod)
		return k8s.Status().Update(context.Background(), &pod)
	})
	must(k.t, err)
}

func retry(f func() error) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = f(); err == nil || !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func containerStatus(pod *corev1.Pod, state corev1.ContainerState, restarts int32) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		out = append(out, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "docker://sha256:0", State: state,
			Ready: state.Running != nil, RestartCount: restarts, ContainerID: "containerd://" + pod.Name,
		})
	}
	return out
}

// Running marks a pod running and ready.
func (k kubelet) Running(names ...string) {
	for _, name := range names {
		k.update(name, func(p *corev1.Pod) {
			now := metav1.Now()
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
			p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, 0)
		})
	}
}

// Exit ends a pod whose restartPolicy is Never: its containers terminated with code and reason.
func (k kubelet) Exit(name string, code int32, reason string) {
	k.update(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodFailed
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now,
		}}, 0)
	})
}

// Terminated reports the training container's exit while the pod is still Running, as the
// kubelet does for a few seconds before it moves the pod to a terminal phase.
func (k kubelet) Terminated(name string, code int32, reason string) {
	k.update(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now,
		}}, 0)
	})
}

// RestartedInPlace reports a running container the kubelet restarted n times (OnFailure).
func (k kubelet) RestartedInPlace(name string, n int32) {
	k.update(name, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = containerStatus(p, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, n)
	})
}

// waitJob waits until the job satisfies cond.
func waitJob(t *testing.T, ns, name, what string, cond func(*v1beta1.TfJob) error) *v1beta1.TfJob {
	t.Helper()
	var job *v1beta1.TfJob
	eventually(t, name+": "+what, func() error {
		job = getJob(t, ns, name)
		return cond(job)
	})
	return job
}

func inState(state v1beta1.JobState, phase v1beta1.JobPhase) func(*v1beta1.TfJob) error {
	return func(j *v1beta1.TfJob) error {
		if j.Status.State != state || j.Status.Phase != phase {
			return fmt.Errorf("state %q phase %q, want %q %q; conditions %+v", j.Status.State, j.Status.Phase, state, phase, j.Status.Conditions)
		}
		return nil
	}
}

func condition(j *v1beta1.TfJob, typ string) *metav1.Condition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func replicaStatus(j *v1beta1.TfJob, typ string) v1beta1.ReplicaStatus {
	for _, rs := range j.Status.ReplicaStatuses {
		if rs.Type == typ {
			return rs
		}
	}
	return v1beta1.ReplicaStatus{}
}

// events lists the events recorded about a job.
func events(t *testing.T, ns, job string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == job {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event about job with the reason whose note contains every part.
func waitEvent(t *testing.T, ns, job, reason string, parts ...string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, "event "+reason, func() error {
		var notes []string
		for _, e := range events(t, ns, job) {
			notes = append(notes, e.Reason+": "+e.Note)
			if e.Reason != reason {
				continue
			}
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e.Note, p)
			}
			if ok {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event containing %q; have %q", reason, parts, notes)
	})
	return found
}

func podNames(job string) []string {
	return []string{job + "-master-0", job + "-worker-0", job + "-worker-1", job + "-ps-0", job + "-ps-1"}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func itoa(i int) string { return fmt.Sprint(i) }
