//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// Kueue itself, built from its module by devctl up --kueue, queues, admits and preempts mlkube
// jobs in the suite's cluster. Its waitForPodsReady timeout is short, for the test of a job
// whose pods never start. It runs after the suite's other tests, which expect an operator
// without --kueue, and leaves it on.
func TestKueue(t *testing.T) {
	// Once the other tests on the suite's cluster are done (they expect no Kueue), beside
	// TestAcrossNodes.
	t.Parallel()
	c, _ := clusterClient(t)
	ctx := context.Background()
	out, took, err := run(t, "up", "--name", name, "--kueue", "--kueue-pods-ready-timeout=40s")
	if err != nil {
		t.Fatalf("devctl up --kueue: %v", err)
	}
	timing("devctl up --kueue on the running cluster (Kueue built or cached, installed)", took)
	contains(t, "devctl up --kueue", out, `LocalQueue "default"`)
	kueueUp(t, c, out)

	// The flavor's nodes: the suite's one node, labelled as the flavor says.
	var nodes corev1.NodeList
	must(t, c.List(ctx, &nodes))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		n.Labels["mlkube.io/e2e-pool"] = "a"
		must(t, c.Patch(ctx, n, patch))
	}
	ns := newNamespace(t, c, "kueue")
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "e2e-pool"}}
	flavor.Spec.NodeLabels = map[string]string{"mlkube.io/e2e-pool": "a"}
	must(t, c.Create(ctx, flavor))
	// Room for one job of two 100m replicas, not two; a job of higher priority preempts. Small
	// requests: the node's own CPU, about half of it free beside the control plane, must hold
	// what this queue and devctl's (whose samples request none) admit at once, or an admitted
	// pod would stay unschedulable and be evicted when its PodsReady timeout runs out.
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "e2e-small"}}
	cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
	cq.Spec.Preemption = &kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
		Flavors:          []kueue.FlavorQuotas{{Name: "e2e-pool", Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("300m")}}}},
	}}
	must(t, c.Create(ctx, cq))
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"}}
	lq.Spec.ClusterQueue = "e2e-small"
	must(t, c.Create(ctx, lq))
	for name, value := range map[string]int32{"low": 10, "high": 1000} {
		must(t, c.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name}, Value: value}))
	}
	t.Cleanup(func() {
		_ = c.Delete(ctx, cq)
		_ = c.Delete(ctx, flavor)
		for _, name := range []string{"low", "high"} {
			_ = c.Delete(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name}})
		}
	})

	// Three at once, each in queues of its own: quota then preemption in e2e-small, the job that
	// never starts and the four kinds in devctl's ClusterQueue mlkube.
	t.Run("scenarios", func(t *testing.T) {
		t.Run("e2e-small", func(t *testing.T) {
			t.Parallel()
			quotaThenPreemption(t, c, ns)
		})
		t.Run("waitForPodsReady: a job whose pods cannot start is evicted and requeued", func(t *testing.T) {
			t.Parallel()
			podsNeverReady(t, c, ns)
		})
		t.Run("every kind is admitted and runs to success", func(t *testing.T) {
			t.Parallel()
			everyKind(t, c, ns)
		})
	})
	// Once those are done, alone: the queue holds nothing the cluster cannot run.
	t.Run("a job of the whole quota is admitted, scheduled and succeeds", func(t *testing.T) { wholeQuota(t, c, ns) })
}

// wholeQuota runs a job that asks for all of devctl's ClusterQueue's cpu quota, sized again by
// a second devctl up --kueue to what the node can run now: Kueue admits it, and the scheduler
// finds room for every pod. A quota of the node's whole allocatable would admit a job that no
// node can hold (its pods Unschedulable until Kueue evicts it, again and again: --timeout ends
// the wait).
func wholeQuota(t *testing.T, c client.Client, ns string) {
	ctx := context.Background()
	if _, _, err := run(t, "up", "--name", name, "--kueue", "--kueue-pods-ready-timeout=40s"); err != nil {
		t.Fatalf("devctl up --kueue: %v", err)
	}
	var cq kueue.ClusterQueue
	must(t, c.Get(ctx, client.ObjectKey{Name: "mlkube"}, &cq))
	quota := quotaCPU(t, &cq)
	half := fmt.Sprintf("%dm", quota.MilliValue()/2)
	file := tfJobOf(t, "whole", replicajob.QueueLabel+": cluster", half, "--step-delay=100ms")
	r := devctlRun(t, "run", file, "-n", ns, "--pending-timeout", "90s", "--timeout", "3m")
	if r.code != 0 {
		t.Fatalf("a job of two %s replicas in a quota of cpu %s: devctl run exited %d:\n%s", half, quota.String(), r.code, r.out)
	}
	contains(t, "devctl run", r.out, "tfjob/whole Succeeded")
}

func quotaThenPreemption(t *testing.T, c client.Client, ns string) {
	ctx := context.Background()
	t.Run("quota: the second job waits, saying why, and runs when the first ends", func(t *testing.T) {
		first := startDevctl(t, "run", queuedJob(t, "first", "small", "", "--step-delay=200ms"), "-n", ns)
		waitPhase(t, c, ns, "first", "running", func(j *v1beta1.TfJob) error {
			if j.Status.State != v1beta1.JobStateRunning || j.Status.Phase == v1beta1.JobPhaseSuspended {
				return fmt.Errorf("state %s, phase %s", j.Status.State, j.Status.Phase)
			}
			return nil
		})
		second := startDevctl(t, "run", queuedJob(t, "second", "small", "", "--step-delay=100ms"), "-n", ns)
		waiting := waitPhase(t, c, ns, "second", "queued for quota", func(j *v1beta1.TfJob) error {
			s := condition(j, v1beta1.JobSuspended)
			if s == nil || s.Reason != "Queued" || !strings.Contains(s.Message, `LocalQueue "small" (ClusterQueue "e2e-small"), waiting for quota`) {
				return fmt.Errorf("Suspended condition %+v", s)
			}
			return nil
		})
		t.Logf("second job, while the first runs: %s", condition(waiting, v1beta1.JobSuspended).Message)
		if n := len(jobPods(t, c, ns, "second")); n != 0 {
			t.Fatalf("%d pods of the job that waits for quota", n)
		}
		kubectlOut := kubectl(t, "get", "tfjobs", "-n", ns, "-o", "wide")
		matches(t, "kubectl get tfjobs -o wide", kubectlOut, `(?m)^second +\S+ +Suspended +Queued `)
		for _, pod := range jobPods(t, c, ns, "first") {
			if pod.Spec.NodeSelector["mlkube.io/e2e-pool"] != "a" {
				t.Errorf("pod %s has nodeSelector %v, not the flavor's node label", pod.Name, pod.Spec.NodeSelector)
			}
		}
		r1, r2 := first(), second()
		for _, r := range []ran{r1, r2} {
			if r.code != 0 {
				t.Fatalf("devctl run exited %d:\n%s", r.code, r.out)
			}
		}
		// devctl run said why the second waited, then that it ran.
		contains(t, "devctl run of the second job", r2.out,
			`Suspended=True (Queued): queued in LocalQueue "small" (ClusterQueue "e2e-small"), waiting for quota`,
			"tfjob/second Succeeded")
	})

	t.Run("preemption: a job of higher priority evicts a running one, which resumes and succeeds", func(t *testing.T) {
		low := startDevctl(t, "run", queuedJob(t, "low", "small", "e2e-low", "--step-delay=1s"), "-n", ns)
		waitPhase(t, c, ns, "low", "running", func(j *v1beta1.TfJob) error {
			if n := runningPods(jobPods(t, c, ns, "low")); n != 2 {
				return fmt.Errorf("%d of 2 pods running", n)
			}
			return nil
		})
		high := startDevctl(t, "run", queuedJob(t, "high", "small", "e2e-high", "--step-delay=100ms"), "-n", ns)
		evicted := waitPhase(t, c, ns, "low", "evicted by preemption", func(j *v1beta1.TfJob) error {
			s := condition(j, v1beta1.JobSuspended)
			if s == nil || s.Status != "True" || s.Reason != "Evicted" || !strings.Contains(s.Message, "Preempted") {
				return fmt.Errorf("Suspended condition %+v", s)
			}
			if n := len(jobPods(t, c, ns, "low")); n != 0 {
				return fmt.Errorf("%d pods left", n)
			}
			return nil
		})
		t.Logf("the evicted job: %s", condition(evicted, v1beta1.JobSuspended).Message)
		if evicted.Status.Restarts != 0 {
			t.Errorf("the eviction counted %d restarts", evicted.Status.Restarts)
		}
		// Kueue restored the templates: the flavor's node label is gone until it is admitted again.
		for _, g := range evicted.Groups() {
			if _, ok := g.Template.Spec.NodeSelector["mlkube.io/e2e-pool"]; ok {
				t.Errorf("group %s keeps the flavor's nodeSelector after eviction: %v", g.Type, g.Template.Spec.NodeSelector)
			}
		}
		rh, rl := high(), low()
		for _, r := range []ran{rh, rl} {
			if r.code != 0 {
				t.Fatalf("devctl run exited %d:\n%s", r.code, r.out)
			}
		}
		contains(t, "devctl run of the evicted job", rl.out, "Suspended=True (Evicted): evicted by Kueue", "tfjob/low Succeeded")
		var done v1beta1.TfJob
		must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "low"}, &done))
		if done.Status.Restarts != 0 {
			t.Errorf("the preempted job ended with %d restarts, want 0", done.Status.Restarts)
		}
	})

}

// podsNeverReady: a job whose image nobody has is admitted, and evicted once its pods are not
// ready within devctl's --kueue-pods-ready-timeout.
func podsNeverReady(t *testing.T, c client.Client, ns string) {
	ctx := context.Background()
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}}
	lq.Spec.ClusterQueue = "mlkube" // devctl up --kueue's
	must(t, c.Create(ctx, lq))
	{
		file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: nopull
  labels: {`+replicajob.QueueLabel+`: pull}
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    template:
      spec:
        containers:
        - name: tensorflow
          image: localhost:5001/mlkube-e2e/nobody-has-this:v0
          resources: {requests: {cpu: 100m}}
`)
		must(t, applyFile(t, c, file, ns))
		j := waitPhase(t, c, ns, "nopull", "evicted for pods not ready", func(j *v1beta1.TfJob) error {
			s := condition(j, v1beta1.JobSuspended)
			if s == nil || s.Reason != "Evicted" || !strings.Contains(s.Message, "PodsReadyTimeout") {
				return fmt.Errorf("Suspended condition %+v", s)
			}
			return nil
		})
		t.Logf("the job whose image nobody has: %s", condition(j, v1beta1.JobSuspended).Message)
		must(t, c.Delete(ctx, j))
	}
}

// everyKind: each kind's distributed sample, queued in devctl's ClusterQueue, is admitted and
// succeeds.
func everyKind(t *testing.T, c client.Client, ns string) {
	ctx := context.Background()
	{
		big := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"}}
		big.Spec.ClusterQueue = "mlkube" // devctl up --kueue's, the node's capacity
		must(t, c.Create(ctx, big))
		for _, k := range v1beta1.Kinds {
			obj := sampleOf(t, k)
			obj.SetNamespace(ns)
			obj.SetName("every-" + k.Label())
			obj.SetLabels(map[string]string{replicajob.QueueLabel: "cluster"})
			must(t, c.Create(ctx, obj))
		}
		for _, k := range v1beta1.Kinds {
			eventually(t, 4*time.Minute, k.Name+" admitted by Kueue and succeeded", func() error {
				job := k.New()
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "every-" + k.Label()}, job); err != nil {
					return err
				}
				if s := job.JobStatus().State; s != v1beta1.JobStateSucceeded {
					return fmt.Errorf("state %q, conditions %+v", s, job.JobStatus().Conditions)
				}
				var wls kueue.WorkloadList
				if err := c.List(ctx, &wls, client.InNamespace(ns)); err != nil {
					return err
				}
				for _, wl := range wls.Items {
					if metav1.IsControlledBy(&wl, job) && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
						return nil
					}
				}
				return fmt.Errorf("no finished Workload of the job")
			})
		}
	}
}

// sampleOf is the distributed sample of kind k (samples/<kind>-distributed.yaml).
func sampleOf(t *testing.T, k *v1beta1.Kind) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("../samples/" + k.Label() + "-distributed.yaml")
	must(t, err)
	var obj unstructured.Unstructured
	must(t, yaml.Unmarshal(data, &obj.Object))
	return &obj
}

// applyFile creates the job a manifest file holds, in ns.
func applyFile(t *testing.T, c client.Client, file, ns string) error {
	t.Helper()
	data, err := os.ReadFile(file)
	must(t, err)
	var obj unstructured.Unstructured
	must(t, yaml.Unmarshal(data, &obj.Object))
	obj.SetNamespace(ns)
	return c.Create(context.Background(), &obj)
}

func runningPods(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// kubectl runs the suite's kubectl (MLKUBE_KUBECTL) on the suite's cluster.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := os.Getenv("MLKUBE_KUBECTL")
	if bin == "" {
		t.Skip("MLKUBE_KUBECTL is unset; make e2e sets it")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// queuedJob writes a TfJob of a master and a worker of 100m CPU each, in LocalQueue queue, of
// WorkloadPriorityClass priority ("" none).
func queuedJob(t *testing.T, name, queue, priority string, args ...string) string {
	t.Helper()
	labels := replicajob.QueueLabel + ": " + queue
	if priority != "" {
		labels += ", kueue.x-k8s.io/priority-class: " + priority
	}
	return tfJobOf(t, name, labels, "100m", args...)
}

// tfJobOf is a TfJob of a MASTER and a WORKER, each asking for cpu, with labels ("k: v, ...").
func tfJobOf(t *testing.T, name, labels, cpu string, args ...string) string {
	t.Helper()
	container := trainer(args...) + `
          resources: {requests: {cpu: ` + cpu + `}}`
	return manifest(t, fmt.Sprintf(`
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: %s
  labels: {%s}
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:%s
  - tfReplicaType: WORKER
    template:
      spec:%s
`, name, labels, container, container))
}

func waitPhase(t *testing.T, c client.Client, ns, name, what string, cond func(*v1beta1.TfJob) error) *v1beta1.TfJob {
	t.Helper()
	var job v1beta1.TfJob
	eventually(t, 3*time.Minute, name+": "+what, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		return cond(&job)
	})
	return &job
}

func jobPods(t *testing.T, c client.Client, ns, job string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	must(t, c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: job}))
	return list.Items
}
