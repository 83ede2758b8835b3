//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job created suspended, as Kueue creates them, with a queue label: no pods until devctl
// resume, then its pods (carrying the queue label) run; devctl suspend deletes the running ones
// and the job waits, devctl resume brings them back, and the job succeeds; devctl run follows it
// all and exits 0.
func suspendAndResume(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "suspend")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: queued
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  runPolicy: {suspend: true}
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:`+trainer("--step-delay=300ms")+`
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=300ms")+`
`)
	ctx := context.Background()
	wait := startDevctl(t, "run", file, "-n", ns)
	pods := func() []corev1.Pod {
		var list corev1.PodList
		must(t, c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: "queued"}))
		return list.Items
	}
	eventually(t, time.Minute, "the job suspended from its creation", func() error {
		var job v1beta1.TfJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "queued"}, &job); err != nil {
			return err
		}
		if c := condition(&job, v1beta1.JobSuspended); c == nil || c.Status != "True" {
			return fmt.Errorf("Suspended condition %+v", c)
		}
		return nil
	})
	if n := len(pods()); n != 0 {
		t.Fatalf("%d pods of a job created suspended", n)
	}

	r := devctlRun(t, "resume", "queued", "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl resume exited %d", r.code)
	}
	contains(t, "devctl resume", r.out, "tfjob/queued resumed: runPolicy.suspend is false")
	running := func(what string, n int) {
		eventually(t, 2*time.Minute, what, func() error {
			up := 0
			for _, p := range pods() {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					up++
					if p.Labels["kueue.x-k8s.io/queue-name"] != "team-a" {
						return fmt.Errorf("pod %s lacks the job's queue label: %v", p.Name, p.Labels)
					}
				}
			}
			if up != n {
				return fmt.Errorf("%d of %d pods running", up, n)
			}
			return nil
		})
	}
	running("both replicas running after the resume", 2)

	r = devctlRun(t, "suspend", "queued", "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl suspend exited %d", r.code)
	}
	contains(t, "devctl suspend", r.out, "tfjob/queued suspended: runPolicy.suspend is true")
	eventually(t, time.Minute, "the running pods gone", func() error {
		if n := len(pods()); n != 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	if job := getJob(t, c, ns, "queued"); job.Status.Phase != v1beta1.JobPhaseSuspended || job.Status.Restarts != 0 || job.Status.StartTime != nil {
		t.Errorf("suspended job: phase %s, restarts %d, startTime %v", job.Status.Phase, job.Status.Restarts, job.Status.StartTime)
	}

	if r = devctlRun(t, "resume", "queued", "-n", ns); r.code != 0 {
		t.Fatalf("devctl resume exited %d", r.code)
	}
	run := wait()
	if run.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", run.code)
	}
	matches(t, "devctl run's output", run.out,
		`(?m)^tfjob +Suspended=True \(Suspended\): runPolicy.suspend is true`,
		`(?m)^tfjob +Suspended=False \(Resumed\): runPolicy.suspend is false`,
		`(?m)^tfjob/queued Succeeded in [0-9.]+s`)
	if job := getJob(t, c, ns, "queued"); job.Status.Restarts != 0 {
		t.Errorf("restarts %d after a suspension, want 0: the pods it deleted are no failures", job.Status.Restarts)
	}
}
