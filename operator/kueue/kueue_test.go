package kueue_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// The control plane has Kueue's CRDs beside mlkube's, from the Kueue module go.mod pins. No
// Kueue manager runs: where a test needs Kueue's scheduler to admit or evict a Workload, it
// writes what the scheduler writes, with Kueue's own workload package.
func TestMain(m *testing.M) {
	jobtest.Main(m, nil, func(e *envtest.Environment) {
		dir, err := kueueCRDs()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, dir)
	})
}

func kueueCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		return "", fmt.Errorf("finding the Kueue module (go mod download sigs.k8s.io/kueue): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "components", "crd", "bases"), nil
}

const poolLabel = "mlkube.io/test-pool"

// queues makes what a cluster administrator makes: a ResourceFlavor with a node label, a
// ClusterQueue and the LocalQueue "lq" in ns.
func queues(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	flavor.Spec.NodeLabels = map[string]string{poolLabel: "a"}
	jobtest.Must(t, jobtest.Client.Create(ctx, flavor))
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
		Flavors: []kueue.FlavorQuotas{{Name: kueue.ResourceFlavorReference(ns), Resources: []kueue.ResourceQuota{{
			Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("10"),
		}}}},
	}}
	jobtest.Must(t, jobtest.Client.Create(ctx, cq))
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lq"}}
	lq.Spec.ClusterQueue = kueue.ClusterQueueReference(ns)
	jobtest.Must(t, jobtest.Client.Create(ctx, lq))
}

// watchPods records every pod created in ns from now on.
func watchPods(t *testing.T, ns string) func() []string {
	t.Helper()
	c, err := client.NewWithWatch(jobtest.Config, client.Options{Scheme: operator.Scheme()})
	jobtest.Must(t, err)
	w, err := c.Watch(context.Background(), &corev1.PodList{}, client.InNamespace(ns))
	jobtest.Must(t, err)
	t.Cleanup(w.Stop)
	created := make(chan string, 100)
	go func() {
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				created <- pod.Name + " " + fmt.Sprint(pod.Spec.NodeSelector)
			}
		}
		close(created)
	}()
	return func() []string {
		var out []string
		for {
			select {
			case p, ok := <-created:
				if !ok {
					return out
				}
				out = append(out, p)
			default:
				return out
			}
		}
	}
}

func workloadOf(t *testing.T, job client.Object) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	jobtest.Eventually(t, "the job's Workload", func() error {
		var list kueue.WorkloadList
		if err := jobtest.Client.List(context.Background(), &list, client.InNamespace(job.GetNamespace())); err != nil {
			return err
		}
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], job) {
				wl = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("none of %d Workloads is the job's", len(list.Items))
	})
	return wl
}

func suspended(t *testing.T, k jobtest.Kind, ns, name string) (v1beta1.Job, *metav1.Condition) {
	t.Helper()
	job := k.NewJob(ns, name, v1beta1.RunPolicy{}).(v1beta1.Job)
	jobtest.Get(t, ns, name, job)
	return job, apimeta.FindStatusCondition(job.JobStatus().Conditions, v1beta1.JobSuspended)
}

// A job of each kind labelled for a LocalQueue: no pod exists before Kueue admits it, though
// it was created without runPolicy.suspend; Kueue's integration makes its Workload, one PodSet
// per replica group, and suspends it; the job's status names the queue and Kueue's words.
// Admission writes the flavor's node labels into the templates and resumes the job, whose pods
// carry them; eviction deletes the pods without counting a restart, restores the templates and
// says why in the status.
func TestQueuedJobRunsOnlyWhenAdmitted(t *testing.T) {
	for _, fw := range operator.Frameworks {
		k := jobtest.KindOf(fw)
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := jobtest.Namespace(t)
			queues(t, ns)
			created := watchPods(t, ns)
			jobtest.StartOperator(t, ns, func(o *operator.Options) { o.Kueue = true })
			job := k.NewJob(ns, "queued", v1beta1.RunPolicy{})
			job.SetLabels(map[string]string{replicajob.QueueLabel: "lq"})
			jobtest.Must(t, jobtest.Client.Create(ctx, job))

			wl := workloadOf(t, job)
			groups := job.(v1beta1.Job).Groups()
			if len(wl.Spec.PodSets) != len(groups) {
				t.Fatalf("Workload has %d PodSets, want one per replica group (%d)", len(wl.Spec.PodSets), len(groups))
			}
			for i, ps := range wl.Spec.PodSets {
				if string(ps.Name) != strings.ToLower(groups[i].Type) || ps.Count != groups[i].Replicas {
					t.Errorf("PodSet %d is %s x%d, want %s x%d", i, ps.Name, ps.Count, strings.ToLower(groups[i].Type), groups[i].Replicas)
				}
				if ps.TopologyRequest == nil || ps.TopologyRequest.PodIndexLabel == nil || *ps.TopologyRequest.PodIndexLabel != v1beta1.LabelReplicaIndex {
					t.Errorf("PodSet %s has no rank label for topology-aware scheduling: %+v", ps.Name, ps.TopologyRequest)
				}
			}
			jobtest.Eventually(t, "the job suspended by Kueue's integration, saying it is queued", func() error {
				j, c := suspended(t, k, ns, "queued")
				if !j.Policy().Suspended() {
					return fmt.Errorf("runPolicy.suspend is %v", j.Policy().Suspend)
				}
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Queued" || !strings.Contains(c.Message, `LocalQueue "lq" (ClusterQueue "`+ns+`")`) {
					return fmt.Errorf("Suspended condition %+v", c)
				}
				return nil
			})
			if pods := created(); len(pods) > 0 {
				t.Fatalf("pods created before Kueue admitted the job: %v", pods)
			}

			// Kueue's scheduler admits the Workload: every PodSet in the flavor.
			admission := &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(ns)}
			for _, ps := range wl.Spec.PodSets {
				admission.PodSetAssignments = append(admission.PodSetAssignments, kueue.PodSetAssignment{
					Name: ps.Name, Count: &ps.Count,
					Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{corev1.ResourceCPU: kueue.ResourceFlavorReference(ns)},
				})
			}
			jobtest.Must(t, jobtest.Retry(func() error {
				jobtest.Get(t, ns, wl.Name, wl)
				workload.SetQuotaReservation(wl, admission, clock.RealClock{})
				workload.SyncAdmittedCondition(wl, time.Now())
				return jobtest.Client.Status().Update(ctx, wl)
			}))
			pods := jobtest.WaitPods(t, ns, replicaNames(job.(v1beta1.Job))...)
			for name, pod := range pods {
				if pod.Spec.NodeSelector[poolLabel] != "a" {
					t.Errorf("pod %s has nodeSelector %v, want the flavor's %s=a", name, pod.Spec.NodeSelector, poolLabel)
				}
			}

			// Kueue preempts it.
			jobtest.Must(t, jobtest.Retry(func() error {
				jobtest.Get(t, ns, wl.Name, wl)
				workload.SetEvictedCondition(wl, time.Now(), kueue.WorkloadEvictedByPreemption, "Preempted to accommodate a workload of higher priority")
				return jobtest.Client.Status().Update(ctx, wl)
			}))
			jobtest.Eventually(t, "the job evicted: suspended, its pods gone, its templates restored", func() error {
				j, c := suspended(t, k, ns, "queued")
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Evicted" || !strings.Contains(c.Message, "Preempted") {
					return fmt.Errorf("Suspended condition %+v", c)
				}
				for _, g := range j.Groups() {
					if len(g.Template.Spec.NodeSelector) > 0 {
						return fmt.Errorf("group %s keeps the flavor's nodeSelector %v", g.Type, g.Template.Spec.NodeSelector)
					}
				}
				if n := len(jobtest.ListPods(t, ns)); n > 0 {
					return fmt.Errorf("%d pods left", n)
				}
				if r := j.JobStatus().Restarts; r != 0 {
					t.Fatalf("eviction counted %d restarts", r)
				}
				return nil
			})
		})
	}
}

func replicaNames(job v1beta1.Job) []string {
	var names []string
	for _, g := range job.Groups() {
		for i := range int(g.Replicas) {
			names = append(names, replicajob.ReplicaName(job.GetName(), g.Type, i))
		}
	}
	return names
}

// A queue-name label no LocalQueue can have (upper case: a LocalQueue's name is a DNS-1123
// subdomain) is refused by the admission policy (operator/config's policy tests). In a cluster
// without it, it is said so in the job's Suspended condition, in Kueue's words, instead of
// asking for a queue that cannot be created.
func TestAQueueNameNoLocalQueueCanHaveIsSaid(t *testing.T) {
	k := jobtest.KindOf(operator.Frameworks[0])
	ns := jobtest.Namespace(t)
	jobtest.StartOperator(t, ns, func(o *operator.Options) { o.Kueue = true })
	job := k.NewJob(ns, "team", v1beta1.RunPolicy{})
	job.SetLabels(map[string]string{replicajob.QueueLabel: "Team-A"})
	jobtest.WithoutAdmissionPolicy(t)
	jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
	jobtest.Eventually(t, "the job saying its queue name can name no LocalQueue", func() error {
		_, c := suspended(t, k, ns, "team")
		if c == nil || !strings.Contains(c.Message, `label kueue.x-k8s.io/queue-name is "Team-A", which no LocalQueue can be named`) ||
			!strings.Contains(c.Message, "RFC 1123") || strings.Contains(c.Message, "create it,") {
			return fmt.Errorf("Suspended condition %+v", c)
		}
		return nil
	})
}
