//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job whose image nobody has, as a user's typo makes it: the operator says so in the job's
// state and its Running condition, naming the replicas and the kubelet's words, and writes it
// once; devctl run prints it once and, with --pending-timeout, gives up with exit 1 and, with
// --rm, deletes the job.
func imageNobodyHas(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "nobody")
	job := func(name string) string {
		return manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: `+name+`
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    replicas: 2
    template:
      spec:
        containers:
        - name: tensorflow
          image: example.com/nobody/has-it:v1
  - tfReplicaType: PS
    template:
      spec:
        containers:
        - name: tensorflow
          image: example.com/nobody/has-it:v1
`)
	}

	r := devctlRun(t, "run", job("given-up"), "-n", ns, "--pending-timeout", "20s", "--rm")
	if r.code != 1 {
		t.Fatalf("devctl run exited %d, want 1", r.code)
	}
	said := 0
	for _, line := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(line, "tfjob ") && strings.Contains(line, "Running=False (ImagePullBackOff)") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("devctl run said why the job waits %d times, want once", said)
	}
	contains(t, "devctl run's output", r.out, "state Running -> Waiting", "worker-0..1, ps-0: cannot pull example.com/nobody/has-it:v1",
		"example.com/nobody/has-it:v1 is not in the local Docker engine either: docker build it",
		"deleted tfjob/given-up (--rm)", "error: tfjob/given-up waited 20s on ImagePullBackOff")

	// The job itself, as kubectl shows it: Waiting, and the condition written once while the
	// kubelet goes on retrying.
	_ = devctlRun(t, "run", job("waits"), "-n", ns, "--timeout", "1s")
	var version string
	eventually(t, 2*time.Minute, "the job Waiting on its image", func() error {
		j := getJob(t, c, ns, "waits")
		cond := condition(j, v1beta1.JobRunning)
		if j.Status.State != v1beta1.JobStateWaiting || cond == nil || cond.Reason != "ImagePullBackOff" ||
			!strings.HasPrefix(cond.Message, "worker-0..1, ps-0: cannot pull example.com/nobody/has-it:v1: ") {
			return fmt.Errorf("state %q, Running condition %+v", j.Status.State, cond)
		}
		version = j.ResourceVersion
		return nil
	})
	time.Sleep(20 * time.Second) // several of the kubelet's retries
	if j := getJob(t, c, ns, "waits"); j.ResourceVersion != version {
		t.Errorf("the job was written again while its pods retried the pull (resourceVersion %s -> %s): %+v", version, j.ResourceVersion, j.Status.Conditions)
	}
	must(t, c.Delete(context.Background(), getJob(t, c, ns, "waits")))
}
