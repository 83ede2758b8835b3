package convert

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// TestSamplesPassValidation creates every sample, converted, in a real kube-apiserver with the
// CRDs, as a dry run: the CRD's schema and CEL rules must accept each one (as Convert's own
// validation does: TestSamples). It skips when
// the control-plane binaries are not built, except under `make test`, where controlplane.Start
// makes that a failure.
func TestSamplesPassValidation(t *testing.T) {
	all := samples(t) // before the control plane: a sample that does not convert fails fast
	cfg := controlplane.ForTest(t)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "samples"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		t.Run(s.path, func(t *testing.T) {
			job := s.res.Job.DeepCopyObject().(client.Object)
			job.SetNamespace(ns)
			if err := k8s.Create(ctx, job, client.DryRunAll); err != nil {
				t.Errorf("the apiserver refuses samples/%s: %v", s.path, err)
			}
		})
	}

	// The dry run does validate: a converted job that Convert warned would not pass (its
	// MASTER's container is not named tensorflow) is refused, for that reason.
	data, err := os.ReadFile(filepath.Join("testdata", "tensorflow-v1alpha1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(data)
	if err != nil {
		t.Fatal(err)
	}
	job := tf(res).DeepCopy()
	job.Namespace = ns
	err = k8s.Create(ctx, job, client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "needs a container named 'tensorflow'") {
		t.Errorf("creating a job without a tensorflow container: %v, want it refused for that", err)
	}
	// Convert said so beforehand, in the apiserver's words.
	if len(res.Invalid) != 1 || !strings.Contains(err.Error(), res.Invalid[0].Detail) {
		t.Errorf("Convert found %v; the apiserver refuses it: %v", res.Invalid, err)
	}
}
