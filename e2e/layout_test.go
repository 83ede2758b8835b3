//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// oneServicePerJob checks, while the job ns/job runs, that it has exactly one Service, named as
// the job, and that the cluster made exactly one EndpointSlice for it, which comes to list all n
// replicas: the replicas reach each other through it, by CoreDNS, as
// <pod>.<job>.<ns>.svc.
func oneServicePerJob(t *testing.T, c client.Client, ns, job string, n int) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s's EndpointSlice lists its %d replicas", job, n), func() error {
		var slices discoveryv1.EndpointSliceList
		if err := c.List(context.Background(), &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: job}); err != nil {
			return err
		}
		if len(slices.Items) != 1 {
			return fmt.Errorf("%d EndpointSlices", len(slices.Items))
		}
		if got := len(slices.Items[0].Endpoints); got != n {
			return fmt.Errorf("%d endpoints", got)
		}
		return nil
	})
	var svcs corev1.ServiceList
	must(t, c.List(context.Background(), &svcs, client.InNamespace(ns), client.MatchingLabels{"mlkube.io/job-name": job}))
	if len(svcs.Items) != 1 || svcs.Items[0].Name != job {
		var names []string
		for _, s := range svcs.Items {
			names = append(names, s.Name)
		}
		t.Errorf("services of %s: %v, want one, %s", job, names, job)
	}
	var slices discoveryv1.EndpointSliceList
	must(t, c.List(context.Background(), &slices, client.InNamespace(ns)))
	if len(slices.Items) != 1 {
		t.Errorf("%d EndpointSlices in %s, want 1", len(slices.Items), ns)
	}
}
