package admitted_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/admitted"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// On a real apiserver with the operator's CRDs as shipped: a job of every kind created after
// the margin counts as checked; a job created before its CRD changed does not; nor does a job of
// a kind whose CRD is no longer the operator's own, whenever it was created.
func TestCheckedOnlyUnderTheOperatorsOwnCRD(t *testing.T) {
	cfg := controlplane.ForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme := runtime.NewScheme()
	jobtest.Must(t, apiextensionsv1.AddToScheme(scheme))
	jobtest.Must(t, v1beta1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	jobtest.Must(t, err)
	// created gives a job of kind k as if created at t: the Checker reads only its kind and
	// creationTimestamp.
	created := func(k *v1beta1.Kind, at time.Time) v1beta1.Job {
		job := jobtest.NewJob(k, "default", "job")
		job.SetCreationTimestamp(metav1.NewTime(at))
		return job.(v1beta1.Job)
	}
	checker := &admitted.Checker{Reader: c}
	go func() { _ = checker.Run(ctx, cfg) }()
	later := time.Now().Add(admitted.Margin + 2*time.Second)
	jobtest.Eventually(t, "the Checker has the CRDs' first list", func() error {
		for _, k := range v1beta1.Kinds {
			if !checker.Checked(ctx, created(k, later)) {
				return fmt.Errorf("a %s created %v after its CRD was installed counts as unchecked", k.Name, admitted.Margin+2*time.Second)
			}
		}
		return nil
	})

	for _, k := range v1beta1.Kinds {
		if checker.Checked(ctx, created(k, time.Now().Add(-time.Hour))) {
			t.Errorf("a %s created an hour before its CRD was installed counts as checked", k.Name)
		}
	}

	// The TfJob CRD changes (a description, as an upgrade might): no TfJob counts as checked,
	// however late; the other kinds still do.
	k := v1beta1.Kinds[0]
	jobtest.Must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: k.CRD()}, &crd); err != nil {
			return err
		}
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description += " (changed)"
		return c.Update(ctx, &crd)
	}))
	jobtest.Eventually(t, "the Checker sees the changed CRD", func() error {
		if checker.Checked(ctx, created(k, later.Add(time.Hour))) {
			return fmt.Errorf("a %s counts as checked under a CRD that is not the operator's", k.Name)
		}
		return nil
	})
	for _, other := range v1beta1.Kinds[1:] {
		if !checker.Checked(ctx, created(other, later)) {
			t.Errorf("a %s counts as unchecked after another kind's CRD changed", other.Name)
		}
	}
}

// SameSchemas tells the operator's CRD from one changed anywhere in a schema.
func TestSameSchemas(t *testing.T) {
	for _, k := range v1beta1.Kinds {
		ours, err := config.CRD(k)
		jobtest.Must(t, err)
		if !admitted.SameSchemas(ours, ours.DeepCopy()) {
			t.Errorf("%s: a copy of the CRD differs from it", k.Name)
		}
		changed := ours.DeepCopy()
		spec := changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Maximum = ptr.To(1.0)
		changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		if admitted.SameSchemas(ours, changed) {
			t.Errorf("%s: the CRD with a maximum on its spec counts as the same", k.Name)
		}
	}
}
