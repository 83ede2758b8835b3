package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// This package's tests run operators on every namespace of their own control plane.
func TestMain(m *testing.M) { jobtest.Main(m, nil) }

func tfJob(ns, name string, workers int32) *v1beta1.TfJob {
	group := func(typ v1beta1.TfReplicaType, n int32) v1beta1.TfReplicaSpec {
		return v1beta1.TfReplicaSpec{TfReplicaType: typ, Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}},
		}}}
	}
	j := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	j.Spec.ReplicaSpecs = []v1beta1.TfReplicaSpec{group(v1beta1.TfReplicaMaster, 1)}
	if workers > 0 {
		j.Spec.ReplicaSpecs = append(j.Spec.ReplicaSpecs, group(v1beta1.TfReplicaWorker, workers))
	}
	return j
}

// A tenant's backlog of jobs does not hold up another tenant's job: the operator hands out its
// work round robin across namespaces (operator/fairqueue), so the job in tenant-b has its pods
// while tenant-a's jobs are still being worked through, not after all of them.
//
// The backlog is made certain, not raced for: tenant-a's pod creates are held at the operator's
// transport until tenant-b's job exists, so the workers are stuck in tenant-a's first jobs while
// its other jobs, then tenant-b's, reach the queue in the order they were created (one watch
// delivers them in that order). A first-come queue hands tenant-b's job out after all of
// tenant-a's. Which pods came first is read from their resourceVersions, not from a clock:
// against etcd they are its revisions, which every write raises (clients may not rely on that;
// a test of this apiserver may). How fast it is, is the bench's (docs/performance.md).
func TestJobOvertakesAnotherNamespacesBacklog(t *testing.T) {
	jobtest.NeedControlPlane(t)
	ctx := context.Background()
	k8s := jobtest.Client
	const backlog = 200
	for _, ns := range []string{"warm-up", "tenant-a", "tenant-b"} {
		jobtest.Must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	release := make(chan struct{})
	released := sync.OnceFunc(func() { close(release) })
	t.Cleanup(released)
	cfg := rest.CopyConfig(jobtest.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/api/v1/namespaces/tenant-a/pods") {
				select {
				case <-release:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	jobtest.StartOperatorWith(t, cfg, "")
	// Once the operator has created a job's pod, its watch of jobs is running: the jobs
	// created from now on come to it as events, in order, not in its first list, which has none.
	jobtest.Must(t, k8s.Create(ctx, tfJob("warm-up", "first", 0)))
	jobtest.WaitPods(t, "warm-up", "first-master-0")

	var wg sync.WaitGroup
	errs := make(chan error, backlog)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < backlog; i += 16 {
				if err := k8s.Create(ctx, tfJob("tenant-a", fmt.Sprintf("job-%03d", i), 0)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	jobtest.Must(t, k8s.Create(ctx, tfJob("tenant-b", "urgent", 2)))
	released()

	bPods := jobtest.WaitPods(t, "tenant-b", "urgent-master-0", "urgent-worker-0", "urgent-worker-1")
	var bDone uint64
	for _, p := range bPods {
		bDone = max(bDone, revision(t, p))
	}
	// Every job of tenant-a gets its pod too: the other tenant's job overtook, it did not starve
	// anyone.
	var aPods corev1.PodList
	jobtest.Eventually(t, "a pod for each of tenant-a's jobs", func() error {
		aPods = corev1.PodList{}
		if err := k8s.List(ctx, &aPods, client.InNamespace("tenant-a")); err != nil {
			return err
		}
		if len(aPods.Items) != backlog {
			return fmt.Errorf("%d pods of %d", len(aPods.Items), backlog)
		}
		return nil
	})
	before := 0
	for _, p := range aPods.Items {
		if revision(t, p) < bDone {
			before++
		}
	}
	t.Logf("%d of tenant-a's %d jobs had their pod before tenant-b's job had all of its pods", before, backlog)
	if before > backlog/2 {
		t.Errorf("%d of tenant-a's %d jobs had their pod before tenant-b's job had all of its pods: tenant-b waited behind tenant-a's backlog", before, backlog)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func revision(t *testing.T, p corev1.Pod) uint64 {
	t.Helper()
	rv, err := strconv.ParseUint(p.ResourceVersion, 10, 64)
	jobtest.Must(t, err)
	return rv
}
