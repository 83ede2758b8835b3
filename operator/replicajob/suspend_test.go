package replicajob_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func suspend(t *testing.T, ns, name string, on bool) {
	t.Helper()
	patch := `{"spec":{"runPolicy":{"suspend":false}}}`
	if on {
		patch = `{"spec":{"runPolicy":{"suspend":true}}}`
	}
	must(t, k8s.Patch(context.Background(), &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))))
}

// A job created suspended (as Kueue creates them) gets no pods and says why; resumed, it starts,
// its deadline clock from then; a queue label on the job reaches its pods.
func TestCreatedSuspendedStartsWhenResumed(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "queued")
	on := true
	job.Spec.RunPolicy.Suspend = &on
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-a", "app": "not-for-pods"}
	must(t, k8s.Create(context.Background(), job))

	j := waitJob(t, ns, "queued", "suspended", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobSuspended); c == nil || c.Status != "True" || c.Reason != "Suspended" || j.Status.Phase != v1beta1.JobPhaseSuspended {
			return errorf("phase %s, Suspended condition %+v", j.Status.Phase, c)
		}
		return nil
	})
	if j.Status.StartTime != nil {
		t.Errorf("startTime %v while suspended from the start", j.Status.StartTime)
	}
	waitEvent(t, ns, "queued", "Suspended", "runPolicy.suspend is true", "deleted 0 unfinished pods")
	if pods := listPods(t, ns); len(pods) != 0 {
		t.Fatalf("%d pods of a suspended job", len(pods))
	}

	suspend(t, ns, "queued", false)
	pods := waitPods(t, ns, podNames("queued")...)
	for name, p := range pods {
		if p.Labels["kueue.x-k8s.io/queue-name"] != "team-a" {
			t.Errorf("pod %s labels %v lack the job's queue label", name, p.Labels)
		}
		if _, ok := p.Labels["app"]; ok {
			t.Errorf("pod %s got the job's label app, which is not a queue's", name)
		}
	}
	j = waitJob(t, ns, "queued", "resumed", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobSuspended); c == nil || c.Status != "False" || c.Reason != "Resumed" || j.Status.StartTime == nil {
			return errorf("Suspended condition %+v, startTime %v", c, j.Status.StartTime)
		}
		return nil
	})
	waitEvent(t, ns, "queued", "Resumed", "activeDeadlineSeconds counts from now")
	if c := condition(j, v1beta1.JobSuspended); j.Status.StartTime.Before(&c.LastTransitionTime) {
		t.Errorf("startTime %v is before the resume at %v", j.Status.StartTime, c.LastTransitionTime)
	}
}

// A job labelled for Kueue's queue and created without runPolicy.suspend waits for Kueue as if
// suspended: with no Kueue integration in this operator, it says that nothing will admit it and
// how to run it; its user's suspend: false then runs it.
func TestQueuedJobWithoutKueueSaysSo(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "queued")
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-a"}
	must(t, k8s.Create(context.Background(), job))
	waitJob(t, ns, "queued", "held for Kueue", func(j *v1beta1.TfJob) error {
		c := condition(j, v1beta1.JobSuspended)
		if c == nil || c.Status != "True" || c.Reason != "Queued" ||
			c.Message != `labelled for Kueue's LocalQueue "team-a" (kueue.x-k8s.io/queue-name), but this operator runs without its Kueue integration (--kueue), so nothing admits the job: `+
				`remove the label, or set runPolicy.suspend: false to run it without Kueue` {
			return errorf("Suspended condition %+v", c)
		}
		return nil
	})
	waitEvent(t, ns, "queued", "Queued", "without its Kueue integration")
	if pods := listPods(t, ns); len(pods) != 0 {
		t.Fatalf("%d pods of a job held for Kueue", len(pods))
	}
	suspend(t, ns, "queued", false)
	waitPods(t, ns, podNames("queued")...)
}

// Suspending a running job deletes its unfinished pods, keeps its finished ones and the restarts
// counted so far, counts no restart for the deletions, and clears startTime; resumed, it
// recreates the deleted replicas and runs to its end.
func TestSuspendRunningJobAndResume(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "pause")))
	names := podNames("pause")
	before := waitPods(t, ns, names...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(names...)
	waitJob(t, ns, "pause", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	kl.Exit("pause-worker-1", 137, "Error")
	waitJob(t, ns, "pause", "restart counted", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 1 {
			return errorf("restarts %d", j.Status.Restarts)
		}
		return nil
	})
	eventually(t, "worker 1 recreated", func() error {
		if p, ok := listPods(t, ns)["pause-worker-1"]; !ok || p.UID == before["pause-worker-1"].UID {
			return errorf("old pod still there or none yet")
		}
		return nil
	})
	kl.Running("pause-worker-1")
	kl.Exit("pause-ps-1", 0, "Completed") // finished before the suspension: kept

	suspend(t, ns, "pause", true)
	eventually(t, "unfinished pods deleted, the finished one kept", func() error {
		pods := listPods(t, ns)
		if len(pods) != 1 {
			return errorf("%d pods left: %v", len(pods), pods)
		}
		if p, ok := pods["pause-ps-1"]; !ok || p.UID != before["pause-ps-1"].UID {
			return errorf("pods left: %v", pods)
		}
		return nil
	})
	j := waitJob(t, ns, "pause", "suspended", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobSuspended); c == nil || c.Status != "True" || j.Status.Phase != v1beta1.JobPhaseSuspended || j.Status.StartTime != nil {
			return errorf("phase %s, Suspended %+v, startTime %v", j.Status.Phase, c, j.Status.StartTime)
		}
		return nil
	})
	if j.Status.Restarts != 1 || j.Status.State != v1beta1.JobStateRunning {
		t.Errorf("restarts %d, state %s while suspended: want the 1 restart counted before, and no outcome", j.Status.Restarts, j.Status.State)
	}
	if c := condition(j, v1beta1.JobRunning); c == nil || c.Status != "False" || c.Reason != "Suspended" {
		t.Errorf("Running condition %+v while suspended", c)
	}
	waitEvent(t, ns, "pause", "Suspended", "deleted 4 unfinished pods")

	suspend(t, ns, "pause", false)
	recreated := waitPods(t, ns, names...)
	if recreated["pause-master-0"].UID == before["pause-master-0"].UID {
		t.Errorf("the master's pod is the one from before the suspension")
	}
	kl.Running("pause-master-0", "pause-worker-0", "pause-worker-1", "pause-ps-0")
	kl.Exit("pause-master-0", 0, "Completed")
	j = waitJob(t, ns, "pause", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	if j.Status.Restarts != 1 {
		t.Errorf("restarts %d at the end, want the 1 from before the suspension", j.Status.Restarts)
	}
}

// Kueue admits a suspended job by setting where its pods run (a node selector and tolerations
// for the flavor, a label of its own) in the update that resumes it, and evicts it by suspending
// it and putting them back in one update: the pods created after each are the templates' as they
// are then.
func TestKueuesChangesReachThePods(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	ctx := context.Background()
	job := standardJob(ns, "admitted")
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	must(t, k8s.Create(ctx, job))
	waitJob(t, ns, "admitted", "suspended", func(j *v1beta1.TfJob) error {
		if j.Status.Phase != v1beta1.JobPhaseSuspended {
			return errorf("phase %s", j.Status.Phase)
		}
		return nil
	})

	toleration := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	admit := func(on bool) {
		must(t, retry(func() error {
			j := getJob(t, ns, "admitted")
			for i := range j.Spec.ReplicaSpecs {
				tmpl := &j.Spec.ReplicaSpecs[i].Template
				tmpl.Labels, tmpl.Spec.NodeSelector, tmpl.Spec.Tolerations = nil, nil, nil
				if on {
					tmpl.Labels = map[string]string{"kueue.x-k8s.io/podset": "main"}
					tmpl.Spec.NodeSelector = map[string]string{"cloud.example.com/pool": "a100"}
					tmpl.Spec.Tolerations = []corev1.Toleration{toleration}
				}
			}
			j.Spec.RunPolicy.Suspend = ptr.To(!on)
			return k8s.Update(ctx, j)
		}))
	}
	admit(true)
	for name, p := range waitPods(t, ns, podNames("admitted")...) {
		if p.Spec.NodeSelector["cloud.example.com/pool"] != "a100" || !slices.Contains(p.Spec.Tolerations, toleration) || p.Labels["kueue.x-k8s.io/podset"] != "main" {
			t.Errorf("pod %s: nodeSelector %v, tolerations %v, labels %v: want what Kueue set", name, p.Spec.NodeSelector, p.Spec.Tolerations, p.Labels)
		}
	}

	admit(false)
	eventually(t, "the evicted job's pods deleted", func() error {
		if pods := listPods(t, ns); len(pods) != 0 {
			return errorf("%d pods left", len(pods))
		}
		return nil
	})
	suspend(t, ns, "admitted", false)
	for name, p := range waitPods(t, ns, podNames("admitted")...) {
		if len(p.Spec.NodeSelector) != 0 || slices.Contains(p.Spec.Tolerations, toleration) || p.Labels["kueue.x-k8s.io/podset"] != "" {
			t.Errorf("pod %s: nodeSelector %v, tolerations %v, labels %v: want those of the templates as restored", name, p.Spec.NodeSelector, p.Spec.Tolerations, p.Labels)
		}
	}
}
