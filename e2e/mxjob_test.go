//go:build e2e

package e2e

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests run MXJobs of the sample trainer in DMLC mode with the real `devctl run`: a
// scheduler, servers and workers that find each other through the scheduler's registry and
// train over real traffic, as MXNet's ps-lite does.

// The MXJob sample (1 scheduler, 2 servers, 2 workers) trains for real and succeeds: every
// server and worker registers with the scheduler, the workers push gradients to both servers,
// the scheduler converges and exits 0 once both workers have finished; devctl run shows it
// all and exits 0, and devctl logs finds the job by its name afterwards.
func TestRunTheMXJobSample(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "mxjob")
	wait := startDevctl(t, "run", "../samples/mxjob-distributed.yaml", "-n", ns)
	oneServicePerJob(t, c, ns, "mx-distributed", 5)
	r := wait()
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		// every replica's log, prefixed
		`(?m)^scheduler-0 \| scheduler-0 step=`, `(?m)^server-0    \| server-0 step=`, `(?m)^server-1    \| server-1 step=`,
		`(?m)^worker-0    \| worker-0 step=`, `(?m)^worker-1    \| worker-1 step=`,
		// the cluster forms through the scheduler's registry
		`(?m)^scheduler-0 \| scheduler-0 step=\d+ server-0 registered at `, `(?m)^scheduler-0 \| scheduler-0 step=\d+ server-1 registered at `,
		`(?m)^scheduler-0 \| scheduler-0 step=\d+ all 2 servers have registered: `,
		`(?m)^worker-0 +\| worker-0 step=\d+ registered with scheduler-0 as worker 0 of 2; parameters on server-0=`,
		`(?m)^worker-1 +\| worker-1 step=\d+ registered with scheduler-0 as worker 1 of 2; parameters on server-0=`,
		// real traffic: both servers hear from the workers and apply their gradients
		`(?m)^server-0 +\| server-0 step=\d+ first call from worker-(0|1)$`, `(?m)^server-1 +\| server-1 step=\d+ first call from worker-(0|1)$`,
		`(?m)^server-(0|1) +\| server-(0|1) step=\d+ applied \d+ gradients, last from worker-(0|1)$`,
		`(?m)^worker-(0|1) +\| worker-(0|1) step=\d+ local_step=\d+ loss=`,
		// the scheduler converged, said so, and waited for the workers
		`(?m)^scheduler-0 \| scheduler-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
		`(?m)^scheduler-0 \| scheduler-0 step=\d+ all 2 worker\(s\) finished; exiting 0$`,
		// states as they changed
		`(?m)^scheduler-0  Running -> Succeeded \(exit code 0\)$`,
		`(?m)^mxjob        all 5 replicas have started \([0-9.]+s\)$`,
		`(?m)^mxjob        Succeeded=True \(SchedulerSucceeded\): job succeeded: scheduler 0 exited 0$`,
		`(?m)^mxjob/mx-distributed Succeeded in [0-9.]+s: job succeeded: scheduler 0 exited 0$`,
	)
	var job v1beta1.MXJob
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "mx-distributed"}, &job))
	if job.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("job state %s", job.Status.State)
	}
	started, ok1 := r.when("all 5 replicas have started")
	ended, ok2 := r.when("state Running -> Succeeded")
	if ok1 && ok2 {
		timing("devctl run samples/mxjob-distributed.yaml: to all 5 replicas running", started)
		timing("devctl run samples/mxjob-distributed.yaml: to the job's end (Succeeded)", ended)
		timing("devctl run samples/mxjob-distributed.yaml: to devctl's exit", r.took)
	}

	// cleanPodPolicy Running kept the scheduler's pod: its log, by the job's name alone.
	logs := devctlRun(t, "logs", "mx-distributed", "-n", ns, "--replica", "scheduler-0")
	if logs.code != 0 {
		t.Fatalf("devctl logs exited %d", logs.code)
	}
	matches(t, "devctl logs --replica scheduler-0", logs.out,
		`^scheduler-0 \| scheduler-0 step=0 dmlc role=scheduler `,
		`(?m)^scheduler-0 \| scheduler-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
	)
}

// An MXJob of the fork for MXNet (fioravanzo.org/v1alpha1) runs after conversion, the
// conversion's warnings printed first; devctl status counts it among the MXJobs.
func aLegacyMXJob(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "legacy-mxjob")
	r := devctlRun(t, "run", "../samples/legacy/mxjob-fioravanzo.yaml", "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		`^warning: converted from fioravanzo.org/v1alpha1 MXJob, an older API, to today's mlkube.io/v1beta1 MXJob`,
		`(?m)^warning: spec.replicaSpecs\[0\], spec.replicaSpecs\[1\] and spec.replicaSpecs\[2\]: moved restartPolicy: OnFailure `,
		`(?m)^created mxjob/legacy-mxjob in namespace e2e-legacy-mxjob`,
		`(?m)^server-(0|1) +\| server-(0|1) step=\d+ first call from worker-(0|1)$`,
		`(?m)^scheduler-0 \| scheduler-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
		`(?m)^mxjob/legacy-mxjob Succeeded in `,
	)
	status := devctlRun(t, "status", "--name", name)
	if status.code != 0 {
		t.Fatalf("devctl status exited %d", status.code)
	}
	matches(t, "devctl status", status.out, `(?m)^MXJobs +(\d+ \w+, )*\d+ Succeeded`)
}
