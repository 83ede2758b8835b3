package manifests

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator/config"
)

// TestApplyIsServerSideAndIdempotent applies the operator's manifests to a real apiserver (the
// CRD is far too large for client-side apply), then applies them again: the second time nothing
// changes. It needs the test control plane, and skips without it outside `make test`.
func TestApplyIsServerSideAndIdempotent(t *testing.T) {
	env, cfg, err := controlplane.Start()
	if errors.Is(err, controlplane.ErrNoAssets) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
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
	// The control plane installed the CRDs already; devctl takes their fields over.
	crds := 0
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds++
		}
	}
	if first.Created != len(objs)-crds || first.Changed != crds {
		t.Errorf("first apply: %s; want %d created and the %d CRDs changed", first, len(objs)-crds, crds)
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
}
