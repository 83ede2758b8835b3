package manifests

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator/admission"
	"github.com/mlkube/mlkube/operator/config"
)

// TestApplyIsServerSideAndIdempotent applies the operator's manifests to a real apiserver (the
// CRD is far too large for client-side apply), then applies them again: the second time nothing
// changes. It needs the test control plane, and skips without it outside `make test`.
func TestApplyIsServerSideAndIdempotent(t *testing.T) {
	cfg := controlplane.ForTest(t)

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	objs, err := Read(config.FS, config.Default)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetImage(objs, "mlkube/operator:dev", "mlkube/operator:0123456789ab"); err != nil {
		t.Fatal(err)
	}
	first, err := Apply(ctx, c, objs)
	if err != nil {
		t.Fatal(err)
	}
	// The control plane installed the CRDs and the admission policy already, as the manifests
	// have them: devctl takes their fields over, and nothing of them changes.
	installed := 0
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" || strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			installed++
		}
	}
	if first.Created != len(objs)-installed || first.Unchanged != installed {
		t.Errorf("first apply: %s; want %d created and the %d installed unchanged", first, len(objs)-installed, installed)
	}

	again, err := Read(config.FS, config.Default)
	if err != nil {
		t.Fatal(err)
	}
	_ = SetImage(again, "mlkube/operator:dev", "mlkube/operator:0123456789ab")
	second, err := Apply(ctx, c, again)
	if err != nil {
		t.Fatal(err)
	}
	if second.Unchanged != len(objs) {
		t.Errorf("second apply of the same manifests: %s; want all %d unchanged", second, len(objs))
	}

	// A controller writing an object's status (the apiserver type-checking the admission policy,
	// a Deployment's rollout) changes nothing devctl applies: the next apply says so.
	mem := OpenMemory(filepath.Join(t.TempDir(), "applied.json"))
	if _, err := ApplyRemembering(ctx, c, again, mem); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, policyWithWarning(ctx, t, c)); err != nil {
		t.Fatal(err)
	}
	afterStatus, err := ApplyRemembering(ctx, c, again, mem)
	if err != nil {
		t.Fatal(err)
	}
	if afterStatus.Unchanged != len(objs) {
		t.Errorf("apply after a status write: %s; want all %d unchanged", afterStatus, len(objs))
	}

	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "mlkube-system", Name: "mlkube-operator"}, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "mlkube/operator:0123456789ab" {
		t.Errorf("Deployment image %s", img)
	}
	owned := false
	for _, m := range d.ManagedFields {
		owned = owned || (m.Manager == FieldOwner && m.Operation == "Apply")
	}
	if !owned {
		t.Errorf("no server-side apply by %s in the managed fields: %+v", FieldOwner, d.ManagedFields)
	}

	_ = SetImage(again, "mlkube/operator:0123456789ab", "mlkube/operator:ba9876543210")
	third, err := Apply(ctx, c, again)
	if err != nil {
		t.Fatal(err)
	}
	if third.Changed != 1 || third.Unchanged != len(objs)-1 {
		t.Errorf("apply with a new image: %s; want the Deployment alone changed", third)
	}

	t.Run("Remembering", func(t *testing.T) { testApplyRemembering(t, c) })
}

// With a Memory, a second apply of the same manifests sends no apply at all; an object changed
// since (here the Deployment, scaled by someone) or a changed manifest is applied as always, and
// the memory survives in its file. A memory that starts empty applies everything.
func testApplyRemembering(t *testing.T, plain client.WithWatch) {
	var applies []string
	c := interceptor.NewClient(plain, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			// devctl applies unstructured objects: the apply configuration has their methods.
			if u, ok := obj.(interface{ GetKind() string }); ok {
				applies = append(applies, u.GetKind())
			} else {
				applies = append(applies, fmt.Sprintf("%T", obj))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	ctx := context.Background()
	manifests := func(image string) []*unstructured.Unstructured {
		objs, err := Read(config.FS, config.Default)
		if err != nil {
			t.Fatal(err)
		}
		if err := SetImage(objs, "mlkube/operator:dev", image); err != nil {
			t.Fatal(err)
		}
		return objs
	}
	path := filepath.Join(t.TempDir(), "applied", "cluster.json")
	apply := func(objs []*unstructured.Unstructured) Applied {
		t.Helper()
		applies = nil
		mem := OpenMemory(path)
		a, err := ApplyRemembering(ctx, c, objs, mem)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Save(); err != nil {
			t.Fatal(err)
		}
		return a
	}

	objs := manifests("mlkube/operator:0123456789ab")
	apply(objs)
	if len(applies) != len(objs) {
		t.Fatalf("first apply sent %d applies, want %d", len(applies), len(objs))
	}
	if a := apply(manifests("mlkube/operator:0123456789ab")); len(applies) != 0 || a.Unchanged != len(objs) {
		t.Errorf("second apply of the same manifests: %s, sent %v; want all unchanged, none sent", a, applies)
	}

	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: "mlkube-system", Name: "mlkube-operator"}
	if err := plain.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	want := *d.Spec.Replicas
	scaled := want + 2
	d.Spec.Replicas = &scaled
	if err := plain.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	apply(manifests("mlkube/operator:0123456789ab"))
	if len(applies) != 1 || applies[0] != "Deployment" {
		t.Errorf("after the Deployment was scaled: sent %v, want the Deployment alone", applies)
	}
	if err := plain.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != want {
		t.Errorf("replicas %d after the apply, want %d as the manifest says", *d.Spec.Replicas, want)
	}

	if a := apply(manifests("mlkube/operator:ba9876543210")); a.Changed != 1 || len(applies) == 0 {
		t.Errorf("apply with a new image: %s, sent %v; want the Deployment changed", a, applies)
	}
}

// policyWithWarning is the admission policy as stored, its status given a type-check warning.
func policyWithWarning(ctx context.Context, t *testing.T, c client.Client) *unstructured.Unstructured {
	t.Helper()
	policy := &unstructured.Unstructured{}
	policy.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"))
	if err := c.Get(ctx, client.ObjectKey{Name: admission.Name}, policy); err != nil {
		t.Fatal(err)
	}
	warning := map[string]any{"fieldRef": "spec.validations[0].expression", "warning": "a warning"}
	if err := unstructured.SetNestedField(policy.Object, map[string]any{"expressionWarnings": []any{warning}}, "status", "typeChecking"); err != nil {
		t.Fatal(err)
	}
	return policy
}
