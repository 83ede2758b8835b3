package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mlkube/mlkube/internal/jobtest"
)

// TestKills SIGKILLs the operator every few seconds while jobs run, and lets it start again
// each time, as the kubelet would. Whatever instant a kill lands on (between a restart's count
// and its pod's deletion, in the middle of a job's creates, before a status write), the jobs
// must end as their pods' exits dictate, with exact restart counts, and with no pod or service
// made twice or left behind.
//
// MLKUBE_CHAOS_JOBS (default 30), MLKUBE_CHAOS_SPREAD (seconds over which the jobs are
// created, default 10) and MLKUBE_CHAOS_KILL_EVERY (seconds, default 3) size it; `make chaos`
// runs 200 jobs over 30 s.
func TestKills(t *testing.T) {
	ns := jobtest.Namespace(t)
	n := envInt("MLKUBE_CHAOS_JOBS", 30)
	every := time.Duration(envInt("MLKUBE_CHAOS_KILL_EVERY", 3)) * time.Second
	k := startKubelet(t, ns, n)
	// One replica, no leader election: a killed process must not have to wait for its own
	// stale lease, and the point is what a crash at any instant leaves behind.
	op := startOperator(t, "operator", ns, true, "--leader-elect=false")

	spread := time.Duration(envInt("MLKUBE_CHAOS_SPREAD", 10)) * time.Second

	start := time.Now()
	kills := 0
	stop := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for {
			select {
			case <-stop:
				return
			// Kills land at random instants: between 0.5 and 1.5 times the period.
			case <-time.After(every/2 + rand.N(every)):
				op.kill()
				kills++
			}
		}
	}()
	createJobs(t, ns, n, spread)
	for progress(ns) < n && time.Since(start) < 10*time.Minute {
		time.Sleep(250 * time.Millisecond)
	}
	close(stop)
	<-killed
	// The last kill's process comes back and finishes the work; no job may stay stuck.
	waitEnded(t, ns, n, 60*time.Second)
	took := time.Since(start)
	v, cleaned := k.settle(t, n, 30*time.Second)
	t.Logf("chaos: kills: %d jobs, %d SIGKILLs (every %v +-50%%), %d operator starts, all ended in %.1f s, clean %.1f s later; %v",
		n, kills, every, op.starts, took.Seconds(), cleaned.Seconds(), v)
	if kills < 3 {
		t.Errorf("only %d kills landed while the jobs ran: the run proves little", kills)
	}
	v.check(t)
}
