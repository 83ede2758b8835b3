package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// envInt reads a size from the environment: `make chaos` runs the full sizes, `make test` the
// defaults.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// createJobs creates jobs 0..n-1, spread evenly over the given time, so that jobs are at every
// stage of their lives when the faults land.
func createJobs(t *testing.T, ns string, n int, over time.Duration) {
	t.Helper()
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(over * time.Duration(i) / time.Duration(n))))
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- jobtest.Client.Create(context.Background(), newJob(ns, i))
		}()
	}
	for range n {
		jobtest.Must(t, <-errs)
	}
}

// listJobs lists the jobs of ns by name.
func listJobs(ctx context.Context, ns string) (map[string]v1beta1.TfJob, error) {
	var list v1beta1.TfJobList
	if err := jobtest.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]v1beta1.TfJob{}
	for _, j := range list.Items {
		out[j.Name] = j
	}
	return out, nil
}

func ended(j v1beta1.TfJob) bool {
	return j.Status.State == v1beta1.JobStateSucceeded || j.Status.State == v1beta1.JobStateFailed
}

// progress counts the jobs that ended, or -1 while the apiserver does not answer.
func progress(ns string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	jobs, err := listJobs(ctx, ns)
	if err != nil {
		return -1
	}
	n := 0
	for _, j := range jobs {
		if ended(j) {
			n++
		}
	}
	return n
}

// waitEnded waits until all n jobs ended, for at most limit, and says how long it took. A job
// still running after limit is stuck: the test fails naming them.
func waitEnded(t *testing.T, ns string, n int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if progress(ns) == n {
			return time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
	jobs, err := listJobs(context.Background(), ns)
	jobtest.Must(t, err)
	var stuck []string
	for name, j := range jobs {
		if !ended(j) {
			stuck = append(stuck, fmt.Sprintf("%s (%s, state %q, phase %q, replicas %q)", name, planOfName(name), j.Status.State, j.Status.Phase, j.Status.Replicas))
		}
	}
	slices.Sort(stuck)
	t.Fatalf("%d of %d jobs stuck after %v: %s", len(stuck), n, limit, strings.Join(stuck[:min(len(stuck), 10)], "; "))
	return 0
}

func planOfName(job string) plan {
	i, _ := strconv.Atoi(strings.TrimPrefix(job, "job-"))
	return planOf(i)
}

// verdict is what the end-state check found; every count but restarts must be 0.
type verdict struct {
	jobs, restarts         int
	duplicates, unexpected int // pods or services made more often than the plan explains; names no job has
	orphans, wrongState    int // objects whose owner is gone or not a job; jobs in the wrong end state
	wrongRestarts, leftRun int // restart counts that differ from the plan; pods left running after the end
	problems               []string
	halfDeleted            int // pods a killed operator left marked for deletion, which the kubelet removed
}

func (v *verdict) problem(format string, args ...any) {
	if len(v.problems) < 20 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

func (v verdict) String() string {
	return fmt.Sprintf("%d jobs, %d restarts counted; %d duplicates, %d unexpected objects, %d orphans, %d in a wrong end state, %d wrong restart counts, %d pods left running (%d half-deleted pods finished by the kubelet)",
		v.jobs, v.restarts, v.duplicates, v.unexpected, v.orphans, v.wrongState, v.wrongRestarts, v.leftRun, v.halfDeleted)
}

// verify checks the end state of n ended jobs against their plans, and every pod and service
// the kubelet ever saw.
func (k *kubelet) verify(t *testing.T, n int) verdict {
	t.Helper()
	ctx := context.Background()
	jobs, err := listJobs(ctx, k.ns)
	jobtest.Must(t, err)
	v := verdict{jobs: len(jobs)}
	expected := map[string]int{} // pod name -> UIDs the plan explains
	services := map[string]int{} // the jobs' services, one each, never replaced
	owners := map[types.UID]string{}
	for i := range n {
		name := jobName(i)
		j, ok := jobs[name]
		if !ok {
			v.wrongState++
			v.problem("%s is gone", name)
			continue
		}
		owners[j.UID] = name
		services[name] = 1
		p := planOf(i)
		for _, pod := range expectedPods(i) {
			expected[pod] = 1
		}
		wantState, wantRestarts := v1beta1.JobStateSucceeded, int32(0)
		switch p {
		case retry:
			wantRestarts = retries
			expected[name+"-worker-0"] = 1 + retries
		case fail:
			wantState = v1beta1.JobStateFailed
		}
		if j.Status.State != wantState {
			v.wrongState++
			v.problem("%s (%s) ended %q, want %q", name, p, j.Status.State, wantState)
		}
		v.restarts += int(j.Status.Restarts)
		if j.Status.Restarts != wantRestarts {
			v.wrongRestarts++
			v.problem("%s (%s) counted %d restarts, want %d", name, p, j.Status.Restarts, wantRestarts)
		}
	}

	k.mu.Lock()
	v.halfDeleted = k.finishedDeletes
	for kind, seen := range map[string]map[string][]types.UID{"pod": k.podUIDs, "service": k.svcUIDs} {
		plan := expected
		if kind == "service" {
			plan = services
		}
		for name, uids := range seen {
			want, ok := plan[name]
			if !ok {
				v.unexpected++
				v.problem("%s %s belongs to no job's plan", kind, name)
				continue
			}
			if len(uids) > want {
				v.duplicates += len(uids) - want
				v.problem("%s %s was made %d times, the plan explains %d", kind, name, len(uids), want)
			}
		}
	}
	k.mu.Unlock()

	var pods corev1.PodList
	jobtest.Must(t, jobtest.Client.List(ctx, &pods, client.InNamespace(k.ns)))
	var svcs corev1.ServiceList
	jobtest.Must(t, jobtest.Client.List(ctx, &svcs, client.InNamespace(k.ns)))
	objects := []metav1.Object{}
	for i := range pods.Items {
		objects = append(objects, &pods.Items[i])
		// cleanPodPolicy Running (the default): nothing of an ended job runs on.
		if p := pods.Items[i].Status.Phase; p == corev1.PodRunning || p == corev1.PodPending {
			v.leftRun++
			pod := &pods.Items[i]
			j := jobs[pod.Labels["mlkube.io/job-name"]]
			v.problem("pod %s (created %s, deleting since %v, finalizers %v) is still %s; its job is %s/%s since %v",
				pod.Name, pod.CreationTimestamp.Format(time.StampMilli), pod.DeletionTimestamp, pod.Finalizers, p, j.Status.State, j.Status.Phase, j.Status.CompletionTime)
		}
	}
	for i := range svcs.Items {
		objects = append(objects, &svcs.Items[i])
	}
	for _, o := range objects {
		ref := metav1.GetControllerOf(o)
		if ref == nil || owners[ref.UID] == "" {
			v.orphans++
			v.problem("%s has no live job as controller (%v)", o.GetName(), ref)
		}
	}
	return v
}

// settle verifies the end state once the clean-up that follows a job's end is done: a kill
// may have landed between a job's last status write and the deletion of its running pods, and
// the restarted operator finishes that. Pods still running after limit are a failure.
func (k *kubelet) settle(t *testing.T, n int, limit time.Duration) (verdict, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		time.Sleep(time.Second) // a reconcile still running could yet show a late duplicate
		v := k.verify(t, n)
		if v.leftRun == 0 || time.Since(start) > limit {
			return v, time.Since(start)
		}
	}
}

// check fails the test when the verdict found anything wrong.
func (v verdict) check(t *testing.T) {
	t.Helper()
	if v.duplicates+v.unexpected+v.orphans+v.wrongState+v.wrongRestarts+v.leftRun > 0 {
		t.Errorf("%v:\n  %s", v, strings.Join(v.problems, "\n  "))
	}
}
