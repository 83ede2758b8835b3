package tui_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/internal/tuifixture"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// The dashboard's client against a real apiserver, without the screen: what its watches send.

// collect runs the client's messages through keep until done says it has what it waits for,
// or fails the test after 30 s.
func collect(t *testing.T, ctx context.Context, c *kube.Client, keep func(any), done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !done() {
		b, ok := c.Next(ctx)
		if !ok {
			t.Fatal("no more messages after 30s")
		}
		for _, m := range b.Msgs {
			keep(m)
		}
	}
}

// clusterNamespace is the shared control plane and a new namespace in it.
func clusterNamespace(t *testing.T, ns string) (*tuifixture.Cluster, string) {
	t.Helper()
	c := envtestCluster(t)
	if err := c.Namespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

func createJob(t *testing.T, c *tuifixture.Cluster, k *v1beta1.Kind, ns, name string) types.UID {
	t.Helper()
	u := jobtest.Unstructured(t, jobtest.NewJob(k, ns, name))
	got, err := c.Dyn.Resource(kubeKind(t, k).GVR()).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.GetUID()
}

func kubeKind(t *testing.T, k *v1beta1.Kind) *v1beta1.Kind {
	t.Helper()
	if !slices.Contains(kube.Kinds, k) {
		t.Fatalf("the dashboard does not list %s", k.Name)
	}
	return k
}

// Beside readable jobs of every kind, one whose spec the Go types cannot read (a number its
// int32 cannot hold, stored before the CRD bounded it) and one whose status they cannot read
// (a string where a number belongs): every job is listed, the two marked unreadable with the
// field, and no watch fails.
func TestClientListsUnreadableJobs(t *testing.T) {
	c, ns := clusterNamespace(t, "unreadable-jobs")
	ctx := context.Background()
	running := v1beta1.JobStatus{State: v1beta1.JobStateRunning, Phase: v1beta1.JobPhaseRunning, Replicas: "worker 2/2"}
	want := map[kube.JobKey]string{} // what Unreadable says of each
	var bad []*unstructured.Unstructured
	for _, k := range v1beta1.Kinds {
		label := k.Label()
		createJob(t, c, k, ns, "good-"+label)
		want[kube.JobKey{Kind: k.Name, Namespace: ns, Name: "good-" + label}] = ""
		bad = append(bad, jobtest.UnreadableJob(t, k, ns, "bad-spec-"+label, running))
		want[kube.JobKey{Kind: k.Name, Namespace: ns, Name: "bad-spec-" + label}] = jobtest.UnreadableTTLWhy
		odd := jobtest.Unstructured(t, jobtest.NewJob(k, ns, "bad-status-"+label))
		odd.Object["status"] = map[string]any{"state": "Running", "restarts": "three"}
		bad = append(bad, odd)
		want[kube.JobKey{Kind: k.Name, Namespace: ns, Name: "bad-status-" + label}] = "status.restarts: string does not fit int32"
	}
	jobtest.StoreUnreadable(t, c.Config, []string{jobtest.UnreadableTTLField, "status.restarts"}, bad...)

	client, err := kube.NewClient(c.Config, kube.Target{Namespace: ns}, kube.Kinds, kube.NewFeed(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	client.WatchJobs(wctx)
	rows := map[kube.JobKey]*kube.Job{}
	synced := map[string]bool{}
	var failed []string
	collect(t, wctx, client, func(m any) {
		switch m := m.(type) {
		case kube.JobUpserted:
			rows[m.Job.Key()] = m.Job
		case kube.JobsSynced:
			synced[m.Kind] = true
		case kube.WatchFailed:
			failed = append(failed, m.Err.Error())
		}
	}, func() bool { return len(synced) == len(kube.Kinds) || len(failed) > 0 })
	if len(failed) > 0 {
		t.Fatalf("a watch failed: %s", strings.Join(failed, "; "))
	}
	for key, why := range want {
		row := rows[key]
		switch {
		case row == nil:
			t.Errorf("%s %s not listed", key.Kind, key)
		case row.Unreadable != why:
			t.Errorf("%s %s: Unreadable = %q, want %q", key.Kind, key, row.Unreadable, why)
		case strings.HasPrefix(key.Name, "bad-spec-") && (row.State != "Running" || row.Replicas != "worker 2/2"):
			t.Errorf("%s %s: the status that reads is lost: %+v", key.Kind, key, row)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d", len(rows), len(want))
	}
}

// A pod labelled like one of a job's replicas is the job's only when the job controls it (its
// controller owner reference carries the job's UID): pods with no owner, with another job as
// owner, or naming the job but not its UID are never shown; one whose owner reference is
// removed goes.
func TestClientShowsOnlyTheJobsOwnPods(t *testing.T) {
	c, ns := clusterNamespace(t, "impostor-pods")
	ctx := context.Background()
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			victim := "victim-" + k.Label()
			uid := createJob(t, c, k, ns, victim)
			other := createJob(t, c, k, ns, "other-"+k.Label())
			var groups []tuifixture.Group // the kit job's, which createJob made
			for _, g := range jobtest.NewJob(k, ns, victim).(v1beta1.Job).Groups() {
				groups = append(groups, tuifixture.Group{Type: g.Type, Replicas: int(g.Replicas)})
			}
			own, err := c.CreatePods(ctx, k.Name, ns, victim, uid, groups, "node-1")
			if err != nil {
				t.Fatal(err)
			}
			yes := true
			impostors := map[string][]metav1.OwnerReference{
				victim + "-worker-7": nil,
				victim + "-worker-8": {{APIVersion: v1beta1.GroupVersion.String(), Kind: k.Name, Name: "other-" + k.Label(), UID: other, Controller: &yes}},
				victim + "-worker-9": {{APIVersion: v1beta1.GroupVersion.String(), Kind: k.Name, Name: victim, UID: "not-the-victims", Controller: &yes}},
			}
			for name, owners := range impostors {
				index := strings.TrimPrefix(name, victim+"-worker-")
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners, Labels: map[string]string{
						v1beta1.LabelJobName: victim, v1beta1.LabelJobKind: k.Label(),
						v1beta1.LabelReplicaType: "worker", v1beta1.LabelReplicaIndex: index,
					}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: k.Container, Image: "mlkube/trainer:test"}}},
				}
				if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}

			client, err := kube.NewClient(c.Config, kube.Target{Namespace: ns}, kube.Kinds, kube.NewFeed(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			client.WatchJob(wctx, 1, kube.JobKey{Kind: k.Name, Namespace: ns, Name: victim}, uid)
			shown := map[string]bool{}
			synced, gone := false, ""
			keep := func(m any) {
				switch m := m.(type) {
				case kube.ReplicaUpserted:
					shown[m.Replica.Name] = true
				case kube.ReplicaDeleted:
					delete(shown, m.Name)
					gone = m.Name
				case kube.ReplicasSynced:
					synced = true
				case kube.WatchFailed:
					t.Fatalf("watch failed: %v", m.Err)
				}
			}
			collect(t, wctx, client, keep, func() bool { return synced })
			if got, want := sorted(shown), sortedList(own); got != want {
				t.Fatalf("shown %s, want the job's own %s", got, want)
			}

			// The impostors change (a status write); the first real pod loses its owner.
			for name := range impostors {
				if err := c.SetPodStatus(ctx, ns, name, tuifixture.PodRunning(k.Container, 0, 0, "")); err != nil {
					t.Fatal(err)
				}
			}
			patch := []byte(`{"metadata":{"ownerReferences":null}}`)
			if _, err := c.Kube.CoreV1().Pods(ns).Patch(ctx, own[0], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			collect(t, wctx, client, keep, func() bool { return gone != "" })
			if gone != own[0] {
				t.Errorf("%s went, want %s", gone, own[0])
			}
			// One watch delivers in order: the impostors' writes came before the patch, and none
			// of them showed.
			if got, want := sorted(shown), sortedList(own[1:]); got != want {
				t.Errorf("after the writes, shown %s, want %s", got, want)
			}
		})
	}
}

func sorted(set map[string]bool) string {
	var out []string
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func sortedList(list []string) string {
	set := map[string]bool{}
	for _, s := range list {
		set[s] = true
	}
	return sorted(set)
}

// A user who may list no kind gets one refusal per kind, each naming its kind, so the screen
// can put them in the kinds table's order (the status lines hold four).
func TestClientNamesTheKindOfEachRefusal(t *testing.T) {
	c, ns := clusterNamespace(t, "refused-kinds")
	user, err := c.Env.AddUser(envtest.User{Name: "nobody"}, c.Config)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kube.NewClient(user.Config(), kube.Target{Namespace: ns}, kube.Kinds, kube.NewFeed(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	client.WatchJobs(ctx)
	refused := map[string]string{} // kind: source
	collect(t, ctx, client, func(m any) {
		if f, ok := m.(kube.WatchFailed); ok {
			refused[f.Kind] = f.Source
		}
	}, func() bool { return len(refused) >= len(kube.Kinds) })
	for _, k := range kube.Kinds {
		if src, ok := refused[k.Name]; !ok || !strings.HasPrefix(src, k.CRD()+" ") {
			t.Errorf("%s's refusal: %q, %v; all: %v", k.Name, src, ok, refused)
		}
	}
}

// A kind's first page (JobsPreview) is the top of the list the watch then sends, in the job
// list's order, and counts every job: what the first screen draws from it is what it draws
// once the whole list is in. The namespaces aa-b, aa and aa0 are listed in that order, as
// the apiserver's keys "aa-b/...", "aa/..." and "aa0/..." compare, not as the names do.
func TestClientPreviewIsTheTopOfTheList(t *testing.T) {
	c := envtestCluster(t)
	ctx := context.Background()
	k := v1beta1.KindNamed("TfJob")
	per := kube.PreviewPage/3 + 5 // more jobs than a page, the page ending in the last namespace
	for _, ns := range []string{"aa", "aa-b", "aa0"} {
		if err := c.Namespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		for i := range per {
			createJob(t, c, k, ns, fmt.Sprintf("job-%03d", i))
		}
	}

	client, err := kube.NewClient(c.Config, kube.Target{}, []*v1beta1.Kind{k}, kube.NewFeed(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	client.WatchJobs(wctx)
	var preview *kube.JobsPreview
	var all []*kube.Job
	synced := false
	collect(t, wctx, client, func(m any) {
		switch m := m.(type) {
		case kube.JobsPreview:
			preview = &m
		case kube.JobUpserted:
			all = append(all, m.Job)
		case kube.JobsSynced:
			synced = true
		case kube.WatchFailed:
			t.Fatal(m.Err)
		}
	}, func() bool { return synced && preview != nil })

	sort.Slice(all, func(a, b int) bool { return kube.JobLess(all[a], all[b]) })
	if preview.Total != len(all) || !preview.More || len(preview.Jobs) != kube.PreviewPage {
		t.Fatalf("the page holds %d jobs of %d (more: %v); the list has %d", len(preview.Jobs), preview.Total, preview.More, len(all))
	}
	for i, j := range preview.Jobs {
		if j.Key() != all[i].Key() {
			t.Fatalf("the page's job %d is %s, the list's %s", i, j.Key(), all[i].Key())
		}
	}
	if first := preview.Jobs[0]; first.Namespace != "aa-b" {
		t.Errorf("the page starts in namespace %s, not aa-b", first.Namespace)
	}
}

// The rows the watches make carry through a real apiserver what the job's view shows of the
// status: the progress, the first failure with its last words, and the count of stalls.
func TestClientRowsCarryProgressAndFirstFailure(t *testing.T) {
	c, ns := clusterNamespace(t, "progress-rows")
	ctx := context.Background()
	k := v1beta1.Kinds[0]
	createJob(t, c, k, ns, "reports")
	total, code := int64(1000), int32(1)
	st := v1beta1.JobStatus{State: v1beta1.JobStateFailed, Phase: v1beta1.JobPhaseFailed, Stalls: 1,
		Progress: &v1beta1.JobProgress{Step: 120, TotalSteps: &total, Metrics: []v1beta1.Metric{{Name: "loss", Value: "0.4213"}},
			Replica: "reports-worker-0", ReportTime: metav1.Now(), Summary: "12%"},
		FirstFailure: &v1beta1.ReplicaFailure{Replica: "worker 1", Pod: "reports-worker-1", Node: "node-1", ExitCode: &code,
			Judged: "permanent: 1-127", LastWords: "Traceback (most recent call last):\nRuntimeError: boom\n"}}
	if err := c.SetJobStatus(ctx, k.Name, ns, "reports", st); err != nil {
		t.Fatal(err)
	}
	client, err := kube.NewClient(c.Config, kube.Target{Namespace: ns}, kube.Kinds, kube.NewFeed(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	client.WatchJobs(wctx)
	var row *kube.Job
	collect(t, wctx, client, func(m any) {
		if u, ok := m.(kube.JobUpserted); ok && u.Job.Name == "reports" {
			row = u.Job
		}
	}, func() bool { return row != nil && row.State == string(v1beta1.JobStateFailed) })
	p, f := row.Progress, row.FirstFailure
	if p == nil || p.Step != 120 || p.Summary != "12%" || len(p.Metrics) != 1 || p.Metrics[0].Value != "0.4213" || p.ReportTime.IsZero() {
		t.Errorf("progress %+v", p)
	}
	if f == nil || f.Node != "node-1" || f.ExitCode == nil || *f.ExitCode != 1 || f.LastWords != st.FirstFailure.LastWords {
		t.Errorf("first failure %+v", f)
	}
	if row.Stalls != 1 {
		t.Errorf("stalls %d", row.Stalls)
	}
}
