//go:build e2e

package e2e

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The JAXJob sample (4 workers, JAX processes 0 to 3) trains for real and succeeds with the real
// `devctl run`: every process registers with the coordinator, worker 0, at
// COORDINATOR_ADDRESS:COORDINATOR_PORT under its PROCESS_ID, and none trains until all
// NUM_PROCESSES have, as jax.distributed.initialize does; worker 0 averages the parameters of
// all 4 round after round, converges and exits 0, the others follow; devctl run shows it all
// and exits 0.
func TestRunTheJAXJobSample(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "jaxjob")
	wait := startDevctl(t, "run", "../samples/jaxjob-distributed.yaml", "-n", ns)
	oneServicePerJob(t, c, ns, "jax-distributed", 4)
	r := wait()
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		// every process's log, prefixed; all 4 registered with the coordinator, then averaged
		`(?m)^worker-0 +\| worker-0 step=0 jax process_id=0 num_processes=4 coordinator=jax-distributed-worker-0\.jax-distributed\.`+ns+`\.svc:6666 `,
		`(?m)^worker-0 +\| worker-0 step=0 all 4 ranks have joined$`,
		`(?m)^worker-1 +\| worker-1 step=\d+ averaged with 4 ranks: round=\d+`,
		`(?m)^worker-2 +\| worker-2 step=\d+ averaged with 4 ranks: round=\d+`,
		`(?m)^worker-3 +\| worker-3 step=\d+ averaged with 4 ranks: round=\d+`,
		// the coordinator converged and the job ended by its exit
		`(?m)^worker-0 +\| worker-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
		`(?m)^worker-0 +Running -> Succeeded \(exit code 0\)$`,
		`(?m)^jaxjob +all 4 replicas have started \([0-9.]+s\)$`,
		`(?m)^jaxjob +Succeeded=True \(WorkerSucceeded\): job succeeded: worker 0 exited 0$`,
		`(?m)^jaxjob/jax-distributed Succeeded in [0-9.]+s: job succeeded: worker 0 exited 0$`,
	)
	var job v1beta1.JAXJob
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "jax-distributed"}, &job))
	if job.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("job state %s", job.Status.State)
	}
	started, ok1 := r.when("all 4 replicas have started")
	ended, ok2 := r.when("state Running -> Succeeded")
	if ok1 && ok2 {
		timing("devctl run samples/jaxjob-distributed.yaml: to all 4 replicas running", started)
		timing("devctl run samples/jaxjob-distributed.yaml: to the job's end (Succeeded)", ended)
		timing("devctl run samples/jaxjob-distributed.yaml: to devctl's exit", r.took)
	}
}
