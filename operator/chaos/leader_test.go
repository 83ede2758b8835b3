package chaos

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
)

// TestLeaderFailover runs two operator processes with leader election, as two replicas of the
// Deployment would. Killing the leader (SIGKILL: its lease is not released) must hand the work
// to the other within 15 s, and the jobs in flight must end exactly as planned: nothing the dead
// leader did is done again. A leader stopped gently (SIGTERM) releases its lease, and a
// follower takes over at its next try.
func TestLeaderFailover(t *testing.T) {
	ns := jobtest.Namespace(t)
	n := envInt("MLKUBE_CHAOS_JOBS", 30)
	k := startKubelet(t, ns, n)
	a := startOperator(t, "operator-a", ns, false)
	waitLeading(t, a, 30*time.Second)
	b := startOperator(t, "operator-b", ns, false)

	createJobs(t, ns, n, 5*time.Second)
	for progress(ns) < n/5 {
		time.Sleep(100 * time.Millisecond)
	}
	before := lease(t, ns)
	if b.leading() {
		t.Fatal("operator-b leads beside operator-a")
	}
	killed := time.Now()
	a.kill()
	failover := waitLeading(t, b, 30*time.Second).Sub(killed)
	after := lease(t, ns)
	if *after.Spec.HolderIdentity == *before.Spec.HolderIdentity || *after.Spec.LeaseTransitions != *before.Spec.LeaseTransitions+1 {
		t.Errorf("lease went from %s (transitions %d) to %s (transitions %d), want one transition to another holder",
			*before.Spec.HolderIdentity, *before.Spec.LeaseTransitions, *after.Spec.HolderIdentity, *after.Spec.LeaseTransitions)
	}
	if failover > 15*time.Second {
		t.Errorf("operator-b took over %.1f s after the leader was killed, want at most 15 s", failover.Seconds())
	}

	took := waitEnded(t, ns, n, 60*time.Second)
	v, _ := k.settle(t, n, 30*time.Second)
	v.check(t)

	// A gentle stop: the leader releases its lease on SIGTERM.
	c := startOperator(t, "operator-c", ns, false)
	time.Sleep(2 * time.Second) // c has started and tried the lease once
	if c.leading() {
		t.Fatal("operator-c leads beside operator-b")
	}
	stopped := time.Now()
	b.signal(sigterm)
	handover := waitLeading(t, c, 30*time.Second).Sub(stopped)
	if !b.exited() {
		t.Error("operator-b still runs after it gave up its lease")
	}
	t.Logf("chaos: leader failover: %d jobs, SIGKILLed leader replaced in %.1f s (lease %v, retry %v), jobs all ended %.1f s after the kill; SIGTERMed leader replaced in %.1f s; %v",
		n, failover.Seconds(), operator.DefaultLeaseDuration, operator.DefaultRetryPeriod, took.Seconds(), handover.Seconds(), v)
}

// waitLeading waits until p says it leads, and says when it did.
func waitLeading(t *testing.T, p *operatorProcess, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.leading() {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not lead within %v", p.name, limit)
	return time.Time{}
}

func lease(t *testing.T, ns string) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	jobtest.Must(t, jobtest.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "mlkube-operator.mlkube.io"}, &l))
	return &l
}
