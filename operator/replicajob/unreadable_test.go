package replicajob_test

import (
	"context"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	restore := loosenCRDs(t)
	for _, k := range v1beta1.Kinds {
		bad := jobtest.KindOf(frameworkOf(t, k)).NewJob(ns, "bad-"+k.Label(), v1beta1.RunPolicy{})
		u := toUnstructured(t, bad)
		must(t, unstructured.SetNestedField(u.Object, int64(2592000000), "spec", "runPolicy", "ttlSecondsAfterFinished"))
		// The loosened CRD takes effect a moment after its update.
		eventually(t, "the loosened "+k.Name+" CRD", func() error { return k8s.Create(ctx, u.DeepCopy()) })
	}
	restore()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	must(t, l.Close())
	startOperator(t, ns, func(o *operator.Options) { o.MetricsBindAddress = addr })

	for _, k := range v1beta1.Kinds {
		kit := jobtest.KindOf(frameworkOf(t, k))
		must(t, k8s.Create(ctx, kit.NewJob(ns, "good-"+k.Label(), v1beta1.RunPolicy{})))
	}
	var want []string
	for _, k := range v1beta1.Kinds {
		want = append(want, podsOf(jobtest.KindOf(frameworkOf(t, k)), "good-"+k.Label())...)
	}
	waitPods(t, ns, want...)
	for _, k := range v1beta1.Kinds {

		bad := "bad-" + k.Label()
		field := "spec.runPolicy.ttlSecondsAfterFinished: number 2592000000 does not fit int32"
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

// loosenCRDs drops every integer bound from the CRDs of every kind, as a CRD of an older mlkube
// or one edited by hand would have none; the func it returns puts the CRDs back as they were.
func loosenCRDs(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	must(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	var saved []*apiextensionsv1.CustomResourceDefinition
	for _, k := range v1beta1.Kinds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		must(t, c.Get(ctx, types.NamespacedName{Name: k.Plural + "." + v1beta1.GroupVersion.Group}, crd))
		saved = append(saved, crd.DeepCopy())
		for i := range crd.Spec.Versions {
			unbound(crd.Spec.Versions[i].Schema.OpenAPIV3Schema)
		}
		must(t, c.Update(ctx, crd))
	}
	return func() {
		t.Helper()
		for _, crd := range saved {
			must(t, retry(func() error {
				live := &apiextensionsv1.CustomResourceDefinition{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(crd), live); err != nil {
					return err
				}
				live.Spec = crd.Spec
				return c.Update(ctx, live)
			}))
		}
	}
}

func unbound(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	if s.Type == "integer" {
		s.Maximum, s.Minimum = nil, nil
	}
	for k, p := range s.Properties {
		unbound(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		unbound(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		unbound(s.AdditionalProperties.Schema)
	}
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
