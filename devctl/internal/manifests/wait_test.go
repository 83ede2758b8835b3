package manifests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestDeploymentRolledOut(t *testing.T) {
	key := client.ObjectKey{Namespace: "mlkube-system", Name: "mlkube-operator"}
	for _, tc := range []struct {
		name       string
		generation int64
		status     appsv1.DeploymentStatus
		ready      bool
		waitingFor string
	}{
		{"rolled out", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}, true, ""},
		{"new spec not seen", 3, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}, false, "to see its new spec"},
		{"new pod not created", 3, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 0, AvailableReplicas: 1}, false, "0 of 1 pods updated"},
		{"old pod left", 3, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1}, false, "1 old to terminate"},
		{"new pod not available", 3, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 0}, false, "0 of 1 pods available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: tc.generation},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
				Status:     tc.status,
			}
			c := fake.NewClientBuilder().WithObjects(d).Build()
			ready, waitingFor, err := DeploymentRolledOut(c, key)(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ready != tc.ready || !strings.Contains(waitingFor, tc.waitingFor) {
				t.Errorf("ready %v waiting for %q; want %v and %q", ready, waitingFor, tc.ready, tc.waitingFor)
			}
		})
	}
}

func TestWaitSaysWhatItWaitedForOnTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Wait(ctx, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "the moon", nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the moon") {
		t.Errorf("err = %v, want a deadline error that names what it waited for", err)
	}
}

func TestAllReportsTheFirstUnreadyCheck(t *testing.T) {
	yes := func(context.Context) (bool, string, error) { return true, "", nil }
	no := func(what string) Check {
		return func(context.Context) (bool, string, error) { return false, what, nil }
	}
	ready, waitingFor, _ := All(yes, no("b"), no("c"))(context.Background())
	if ready || waitingFor != "b" {
		t.Errorf("All = %v, %q; want false, b", ready, waitingFor)
	}
	if ready, _, _ := All(yes, yes)(context.Background()); !ready {
		t.Error("All of ready checks is not ready")
	}
}

func TestDaemonSetRolledOut(t *testing.T) {
	key := client.ObjectKey{Namespace: "mlkube-nodeprobe", Name: "nodeprobe"}
	for _, tc := range []struct {
		name       string
		generation int64
		status     appsv1.DaemonSetStatus
		ready      bool
		waitingFor string
	}{
		{"rolled out", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}, true, ""},
		{"new spec not seen", 3, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}, false, "to see its new spec"},
		{"not seen at all yet", 1, appsv1.DaemonSetStatus{}, false, "to see its new spec"},
		{"old pods left", 3, appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberReady: 3}, false, "1 of 3 pods updated"},
		{"new pods not ready", 3, appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 2}, false, "2 of 3 pods ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: tc.generation},
				Status:     tc.status,
			}
			c := fake.NewClientBuilder().WithObjects(ds).Build()
			ready, waitingFor, err := DaemonSetRolledOut(c, key)(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ready != tc.ready || !strings.Contains(waitingFor, tc.waitingFor) {
				t.Errorf("ready %v waiting for %q; want %v and %q", ready, waitingFor, tc.ready, tc.waitingFor)
			}
		})
	}
}
