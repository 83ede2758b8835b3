package replicajob_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// No stored object stops another job. A job of each kind is stored with a TTL in milliseconds
// (2592000000, past int32) through a CRD without its bounds, as an older CRD or a hand-edited one
// allowed; the CRD is then restored and the operator started. Its informers list every kind
// whole: a job of each kind beside the unreadable ones gets its pods, and each unreadable job
// gets the condition Unreadable and a Warning event naming the field, and is counted in
// mlkube_jobs_unreadable. Fixed with an edit, it runs.
func TestUnreadableJobStopsNoOtherJob(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	var bad []*unstructured.Unstructured
	for _, k := range v1beta1.Kinds {
		bad = append(bad, jobtest.UnreadableJob(t, k, ns, "bad-"+k.Label(), v1beta1.JobStatus{}))
	}
	jobtest.StoreUnreadable(t, cfg, []string{jobtest.UnreadableTTLField}, bad...)

	addr := freeAddr(t)
	startOperator(t, ns, func(o *operator.Options) { o.MetricsBindAddress = addr })

	want := runGoodJobs(t, ns)
	for _, k := range v1beta1.Kinds {

		bad := "bad-" + k.Label()
		field := jobtest.UnreadableTTLWhy
		eventually(t, bad+" Unreadable", func() error {
			job := k.New()
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: bad}, job); err != nil {
				return err
			}
			c := apimeta.FindStatusCondition(job.JobStatus().Conditions, v1beta1.JobUnreadable)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "DecodeFailed" || !strings.Contains(c.Message, field) {
				return errorf("condition %+v, want Unreadable True naming %q", c, field)
			}
			return nil
		})
		waitEvent(t, ns, bad, "Unreadable", field, "kubectl edit")
		if pods := listPods(t, ns); len(podsIn(pods, bad)) > 0 {
			t.Errorf("the operator acted on unreadable %s: pods %v", bad, podsIn(pods, bad))
		}
	}
	gauge := func(want float64) {
		t.Helper()
		eventually(t, "mlkube_jobs_unreadable", func() error {
			body, err := scrape("http://" + addr + "/metrics")
			if err != nil {
				return err
			}
			for _, k := range v1beta1.Kinds {
				labels := map[string]string{"kind": k.Name, "namespace": ns}
				if got, _ := sample(body, "mlkube_jobs_unreadable", labels); got != want {
					return errorf("mlkube_jobs_unreadable%v = %v, want %v", labels, got, want)
				}
			}
			return nil
		})
	}
	gauge(1)

	// Fixed by hand (the CRD's ratcheting lets an edit keep what it does not touch), a job reads
	// whole again: the condition turns False, the job runs, and it is counted no more.
	for _, k := range v1beta1.Kinds {
		bad := "bad-" + k.Label()
		job := &unstructured.Unstructured{}
		job.SetGroupVersionKind(v1beta1.GroupVersion.WithKind(k.Name))
		job.SetNamespace(ns)
		job.SetName(bad)
		must(t, k8s.Patch(ctx, job, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runPolicy":{"ttlSecondsAfterFinished":60}}}`))))
		want = append(want, podsOf(jobtest.KindOf(frameworkOf(t, k)), bad)...)
		waitPods(t, ns, want...)
		eventually(t, bad+" readable", func() error {
			job := k.New()
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: bad}, job); err != nil {
				return err
			}
			if c := apimeta.FindStatusCondition(job.JobStatus().Conditions, v1beta1.JobUnreadable); c == nil || c.Status != metav1.ConditionFalse {
				return errorf("condition %+v, want Unreadable False", c)
			}
			return nil
		})
	}
	gauge(0)
}

func toUnstructured(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	must(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind(v1beta1.KindOf(obj).Name))
	return u
}

func frameworkOf(t *testing.T, k *v1beta1.Kind) replicajob.Framework {
	t.Helper()
	for _, fw := range operator.Frameworks {
		if fw.Kind() == k {
			return fw
		}
	}
	t.Fatalf("no framework runs %s", k.Name)
	return nil
}

// runGoodJobs creates a job of every kind, good-<kind>, and waits for all their pods, which it
// names: the operator serves them whatever else a test stored beside them.
func runGoodJobs(t *testing.T, ns string) []string {
	t.Helper()
	for _, k := range v1beta1.Kinds {
		kit := jobtest.KindOf(frameworkOf(t, k))
		must(t, k8s.Create(context.Background(), kit.NewJob(ns, "good-"+k.Label(), v1beta1.RunPolicy{})))
	}
	var want []string
	for _, k := range v1beta1.Kinds {
		want = append(want, podsOf(jobtest.KindOf(frameworkOf(t, k)), "good-"+k.Label())...)
	}
	waitPods(t, ns, want...)
	return want
}

// podsOf names the replica pods of a job the kit makes.
func podsOf(kit jobtest.Kind, job string) []string {
	var names []string
	for _, g := range kit.NewJob("", job, v1beta1.RunPolicy{}).(v1beta1.Job).Groups() {
		for i := range int(g.Replicas) {
			names = append(names, replicajob.ReplicaName(job, g.Type, i))
		}
	}
	return names
}

func podsIn(pods map[string]corev1.Pod, job string) []string {
	var out []string
	for name, p := range pods {
		if p.Labels[v1beta1.LabelJobName] == job {
			out = append(out, name)
		}
	}
	return out
}

// A cluster without the admission policy stores a job whose container asks for a quantity that
// is none ("4x4": its CRD leaves quantities to the policy, hack/crdrules). The operator cannot
// decode it: the job is Unreadable, saying why, gets no pods, and stops no other job.
func TestAJobWithNoQuantityIsUnreadableWithoutThePolicy(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	k := v1beta1.Kinds[0]
	kit := jobtest.KindOf(frameworkOf(t, k))
	bad := &unstructured.Unstructured{Object: jobtest.ManifestOf(k, ns, "topology", map[string]any{}, jobtest.Group{
		Type: k.Deciders[0], Replicas: 1,
		Template: map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
			"name": k.Container, "image": "mlkube/trainer:test", "resources": map[string]any{"limits": map[string]any{"google.com/tpu": "4x4"}},
		}}}},
	})}
	jobtest.WithoutAdmissionPolicy(t)
	must(t, k8s.Create(ctx, bad))
	startOperator(t, ns)
	must(t, k8s.Create(ctx, kit.NewJob(ns, "good", v1beta1.RunPolicy{})))
	waitPods(t, ns, podsOf(kit, "good")...)
	eventually(t, "topology Unreadable", func() error {
		job := k.New()
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "topology"}, job); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(job.JobStatus().Conditions, v1beta1.JobUnreadable)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "quantities") {
			return errorf("condition %+v, want Unreadable True saying the quantity is none", c)
		}
		return nil
	})
	if pods := listPods(t, ns); len(podsIn(pods, "topology")) > 0 {
		t.Errorf("the operator acted on an unreadable job: pods %v", podsIn(pods, "topology"))
	}
}
