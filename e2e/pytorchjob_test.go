//go:build e2e

package e2e

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The PyTorchJob sample (a master and 3 workers) trains for real and succeeds with the real
// `devctl run`: every rank reaches the master at MASTER_ADDR:MASTER_PORT, the master averages
// the parameters of all WORLD_SIZE ranks round after round, converges and exits 0, the workers
// follow; devctl run shows it all and exits 0.
func TestRunThePyTorchJobSample(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "pytorchjob")
	wait := startDevctl(t, "run", "../samples/pytorchjob-distributed.yaml", "-n", ns)
	oneServicePerJob(t, c, ns, "pytorch-distributed", 4)
	r := wait()
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		// every rank's log, prefixed; the workers joined the master and averaged over all 4
		`(?m)^master-0 +\| master-0 step=`,
		`(?m)^worker-0 +\| worker-0 step=\d+ averaged with 4 ranks: round=\d+`,
		`(?m)^worker-1 +\| worker-1 step=\d+ averaged with 4 ranks: round=\d+`,
		`(?m)^worker-2 +\| worker-2 step=\d+ averaged with 4 ranks: round=\d+`,
		// the master converged and the job ended by its exit
		`(?m)^master-0 +\| master-0 step=\d+ converged: eval loss [0-9.]+ < 0.01; exiting 0$`,
		`(?m)^master-0 +Running -> Succeeded \(exit code 0\)$`,
		`(?m)^pytorchjob +all 4 replicas have started \([0-9.]+s\)$`,
		`(?m)^pytorchjob +Succeeded=True \(MasterSucceeded\): job succeeded: master 0 exited 0$`,
		`(?m)^pytorchjob/pytorch-distributed Succeeded in [0-9.]+s: job succeeded: master 0 exited 0$`,
	)
	var job v1beta1.PyTorchJob
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "pytorch-distributed"}, &job))
	if job.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("job state %s", job.Status.State)
	}
	started, ok1 := r.when("all 4 replicas have started")
	ended, ok2 := r.when("state Running -> Succeeded")
	if ok1 && ok2 {
		timing("devctl run samples/pytorchjob-distributed.yaml: to all 4 replicas running", started)
		timing("devctl run samples/pytorchjob-distributed.yaml: to the job's end (Succeeded)", ended)
		timing("devctl run samples/pytorchjob-distributed.yaml: to devctl's exit", r.took)
	}
}
