package chaos

import (
	"testing"
	"time"

	"github.com/mlkube/mlkube/internal/jobtest"
)

// TestAPIServerRestart stops the apiserver while jobs run and starts it again on the same etcd.
// The operator, deployed as it is (leader election on), loses its watches and, when the
// apiserver stays away longer than its renew deadline, its lease too, and exits; it is started
// again as the kubelet would. Once the apiserver is back, no job may stay stuck for more than
// 60 s, and the end state must be as exact as without the outage.
//
// MLKUBE_CHAOS_OUTAGE (seconds, default 10) is how long the apiserver stays down.
func TestAPIServerRestart(t *testing.T) {
	ns := jobtest.Namespace(t)
	n := envInt("MLKUBE_CHAOS_JOBS", 30)
	outage := time.Duration(envInt("MLKUBE_CHAOS_OUTAGE", 10)) * time.Second
	k := startKubelet(t, ns, n)
	op := startOperator(t, "operator", ns, true)

	createJobs(t, ns, n, 5*time.Second)
	// Fault in the middle: some jobs ended, most still running.
	for progress(ns) < n/5 {
		time.Sleep(100 * time.Millisecond)
	}
	endedBefore := progress(ns)
	apiserver := jobtest.Env.ControlPlane.APIServer
	// SIGTERM; if it has not exited after 5 s (a loaded apiserver drains its requests for
	// longer), SIGKILL: either way it is gone, and etcd keeps everything.
	apiserver.StopTimeout = 5 * time.Second
	how := "stopped"
	if err := apiserver.Stop(); err != nil {
		how = "killed after 5 s"
		t.Logf("apiserver: %v; killed", err)
	}
	time.Sleep(outage)
	jobtest.Must(t, apiserver.Start())

	took := waitEnded(t, ns, n, 60*time.Second)
	v, cleaned := k.settle(t, n, 30*time.Second)
	t.Logf("chaos: apiserver restart: %d jobs, %d ended before the outage, apiserver %s and down %v, operator started %d times, all ended %.1f s after the apiserver was back, clean %.1f s later; %v",
		n, endedBefore, how, outage, op.starts, took.Seconds(), cleaned.Seconds(), v)
	v.check(t)
}
