// Package jobtest runs mlkube's operator against a real kube-apiserver and etcd for tests, and
// plays the kubelet there: there is none, so tests write the pod statuses a kubelet would
// (running, exit codes, OOMKilled). It also holds the suite of behaviour every job kind on the
// replica-job engine shares (Conformance).
package jobtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator"
)

var (
	// Config and Client reach the test control plane once Main started it; Env is the control
	// plane itself, for tests that add users or restart the apiserver.
	Config *rest.Config
	Client client.Client
	Env    *envtest.Environment
	// noControlPlane is why envtest tests skip under a plain `go test` without binaries.
	noControlPlane error
)

// Main starts the control plane, calls ready, runs the test binary's tests and exits. Without
// control-plane binaries the tests that need them skip, saying how to get them; under
// `make test` (MLKUBE_REQUIRE_ENVTEST) that is a failure instead. Options adjust the control
// plane before it starts.
func Main(m *testing.M, ready func(), options ...func(*envtest.Environment)) {
	logger := logr.Discard()
	if os.Getenv("MLKUBE_TEST_LOG") != "" {
		logger = zap.New(zap.UseDevMode(true))
	}
	ctrl.SetLogger(logger)
	env, cfg, err := controlplane.Start(options...)
	if errors.Is(err, controlplane.ErrNoAssets) {
		noControlPlane = err
		exit(m.Run())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	Config, Env = cfg, env
	Client, err = client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if ready != nil {
		ready()
	}
	code := m.Run()
	_ = env.Stop()
	exit(code)
}

var afterAll []func()

// AfterAll registers f to run once the tests have run and the control plane has stopped:
// Main ends the process, so a TestMain's own defers would never run.
func AfterAll(f func()) { afterAll = append(afterAll, f) }

func exit(code int) {
	for _, f := range afterAll {
		f()
	}
	os.Exit(code)
}

// WithoutAdmissionPolicy removes the admission policy's binding until the test ends, as an
// administrator who leaves the policy out would: for what the operator does with a job that
// only the policy refuses. No other test may run meanwhile (no t.Parallel beside it).
func WithoutAdmissionPolicy(t *testing.T) {
	t.Helper()
	Must(t, controlplane.Enforce(Config, false))
	t.Cleanup(func() { Must(t, controlplane.Enforce(Config, true)) })
}

var nsCounter atomic.Int32

// NeedControlPlane skips the test, saying how to build one, when there is no control plane.
func NeedControlPlane(t *testing.T) {
	t.Helper()
	if noControlPlane != nil {
		t.Skip(noControlPlane)
	}
}

// Namespace makes a namespace of the test's own, so tests never see each other's jobs.
func Namespace(t *testing.T) string {
	t.Helper()
	NeedControlPlane(t)
	// A DNS label: the test's name, lower-cased, anything else a dash.
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(t.Name())))
	name = strings.TrimRight(name[:min(len(name), 60)], "-")
	Must(t, Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

// StartOperator runs the operator on one namespace until the test ends or stop is called.
func StartOperator(t *testing.T, ns string, mutate ...func(*operator.Options)) (stop func()) {
	t.Helper()
	return StartOperatorWith(t, Config, ns, mutate...)
}

// StartOperatorWith is StartOperator with the operator's own rest config: a test that wraps
// its transport sees, or holds, what the operator sends.
func StartOperatorWith(t *testing.T, cfg *rest.Config, ns string, mutate ...func(*operator.Options)) (stop func()) {
	t.Helper()
	opts := operator.Options{Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0", ManyPerProcess: true}
	for _, m := range mutate {
		m(&opts)
	}
	mgr, err := operator.New(cfg, opts)
	Must(t, err)
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

// Must fails the test on an error.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Errorf is fmt.Errorf, short for conditions.
func Errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Eventually polls cond until it returns nil, failing the test with cond's last error.
func Eventually(t *testing.T, what string, cond func() error) {
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

// Retry retries f on write conflicts.
func Retry(f func() error) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = f(); err == nil || !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// ListPods lists the pods of a namespace by name.
func ListPods(t *testing.T, ns string) map[string]corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	Must(t, Client.List(context.Background(), &pods, client.InNamespace(ns)))
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		out[p.Name] = p
	}
	return out
}

// ListServices lists the services of a namespace by name.
func ListServices(t *testing.T, ns string) map[string]corev1.Service {
	t.Helper()
	var svcs corev1.ServiceList
	Must(t, Client.List(context.Background(), &svcs, client.InNamespace(ns)))
	out := map[string]corev1.Service{}
	for _, s := range svcs.Items {
		out[s.Name] = s
	}
	return out
}

// WaitPods waits until exactly the named pods exist.
func WaitPods(t *testing.T, ns string, names ...string) map[string]corev1.Pod {
	t.Helper()
	var pods map[string]corev1.Pod
	Eventually(t, "pods "+strings.Join(names, ","), func() error {
		pods = ListPods(t, ns)
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

// Events lists the events recorded about a job.
func Events(t *testing.T, ns, job string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	Must(t, Client.List(context.Background(), &list, client.InNamespace(ns)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == job {
			out = append(out, e)
		}
	}
	return out
}

// WaitEvent waits for an event about job with the reason whose note contains every part.
func WaitEvent(t *testing.T, ns, job, reason string, parts ...string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	Eventually(t, "event "+reason, func() error {
		var notes []string
		for _, e := range Events(t, ns, job) {
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

// Get reads an object fresh from the apiserver.
func Get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	Must(t, Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj))
}

// GetJob reads the job ns/name, of type T: jobtest.GetJob[v1beta1.TfJob](t, ns, name).
func GetJob[T any, P interface {
	*T
	client.Object
}](t *testing.T, ns, name string) P {
	t.Helper()
	job := P(new(T))
	Get(t, ns, name, job)
	return job
}

// WaitJob waits until the job ns/name satisfies cond, and returns it.
func WaitJob[T any, P interface {
	*T
	client.Object
}](t *testing.T, ns, name, what string, cond func(P) error) P {
	t.Helper()
	var job P
	Eventually(t, name+": "+what, func() error {
		job = GetJob[T, P](t, ns, name)
		return cond(job)
	})
	return job
}
