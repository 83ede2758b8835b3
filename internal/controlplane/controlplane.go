// Package controlplane starts the real kube-apiserver and etcd that mlkube's tests run against
// (envtest), built from Go modules by hack/control-plane.sh, with mlkube's CRDs installed.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mlkube/mlkube/operator/admission"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Start starts etcd and kube-apiserver with the CRDs of operator/config/crd and the admission
// policy of operator/admission installed.
//
// It finds the binaries in $KUBEBUILDER_ASSETS, else in the repository's bin/k8s. When there
// are none it returns ErrNoAssets, which tests turn into a skip that says how to get them, except
// under `make test` (MLKUBE_REQUIRE_ENVTEST=1), where a missing control plane is a failure: the
// tests that need it must never pass by not running. Options adjust the environment before it
// starts.
func Start(options ...func(*envtest.Environment)) (*envtest.Environment, *rest.Config, error) {
	if fuzzing() {
		return nil, nil, errFuzzing
	}
	root := repoRoot()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if _, err := os.Stat(filepath.Join(root, "bin", "k8s", "kube-apiserver")); err == nil {
			assets = filepath.Join(root, "bin", "k8s")
		}
	}
	if assets == "" {
		if os.Getenv("MLKUBE_REQUIRE_ENVTEST") != "" {
			return nil, nil, fmt.Errorf("no control plane binaries: KUBEBUILDER_ASSETS is unset and %s is empty; run hack/control-plane.sh", filepath.Join(root, "bin", "k8s"))
		}
		return nil, nil, ErrNoAssets
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "operator", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	for _, o := range options {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves etcd and the apiserver running when a later step (installing the CRDs)
		// fails; nobody else could stop them.
		_ = env.Stop()
		return nil, nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	if err := installPolicy(cfg); err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	return env, cfg, nil
}

// installPolicy installs the admission policy the operator's manifests install
// (operator/admission) and waits until the apiserver enforces it.
func installPolicy(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := c.Create(context.Background(), admission.Policy()); err != nil {
		return fmt.Errorf("installing the admission policy: %w", err)
	}
	return Enforce(cfg, true)
}

// Enforce binds the admission policy (on) or removes its binding, as an administrator who leaves
// it out would, and waits until the apiserver does as told: it loads bindings from a watch, a
// moment after their change, and a test that changes a job before then would be misled.
func Enforce(cfg *rest.Config, on bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if on {
		err = c.Create(ctx, admission.Binding())
	} else {
		err = client.IgnoreNotFound(c.Delete(ctx, admission.Binding()))
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the admission policy: %w", err)
	}
	// A job no pod could carry, created in a dry run: refused while the policy holds.
	probe := probeJob(v1beta1.Kinds[0])
	for {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if meta.IsNoMatchError(err) {
			return nil // a control plane without mlkube's CRDs (options replaced them): nothing to guard
		}
		refused := err != nil && strings.Contains(err.Error(), admission.LabelKeyMessage)
		if err != nil && !refused && !apierrors.IsNotFound(err) {
			return fmt.Errorf("probing the admission policy: %w", err)
		}
		if refused == on && (on || err == nil) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the admission policy %s: not as asked (enforced: %v) a minute later", admission.Name, on)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeJob is a job of kind k whose pod template has a label key no pod can carry.
func probeJob(k *v1beta1.Kind) *unstructured.Unstructured {
	group := map[string]any{
		k.TypeField: k.Deciders[0],
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"not a key": "x"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": k.Container, "image": "probe"}}},
		},
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": "default", "name": "admission-policy-probe"},
		"spec":     map[string]any{"replicaSpecs": []any{group}},
	}}
	job.SetGroupVersionKind(v1beta1.GroupVersion.WithKind(k.Name))
	return job
}

// ErrNoAssets says the control-plane binaries are not built.
var ErrNoAssets = fmt.Errorf("control plane binaries not built: run `make test` (or hack/control-plane.sh) to build kube-apiserver and etcd")

// errFuzzing is an ErrNoAssets: callers skip their envtest tests as they do without binaries.
var errFuzzing = fmt.Errorf("no control plane while fuzzing: %w", ErrNoAssets)

// fuzzing says whether this test binary runs under `go test -fuzz`. The fuzzer starts the binary
// again for every worker and runs no test in them; a control plane per worker would cost seconds
// each and outlive the workers, which the fuzzer kills when its time is up.
func fuzzing() bool {
	args := os.Args[1:]
	for i, a := range args {
		a = "-" + strings.TrimLeft(a, "-")
		switch {
		case strings.HasPrefix(a, "-test.fuzzworker"),
			strings.HasPrefix(a, "-test.fuzz=") && a != "-test.fuzz=",
			a == "-test.fuzz" && i+1 < len(args) && args[i+1] != "":
			return true
		}
	}
	return false
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ForTest starts a control plane for one test and stops it when the test ends. Without the
// binaries the test is skipped, except under `make test`, where Start makes that a failure.
func ForTest(t testing.TB, options ...func(*envtest.Environment)) *rest.Config {
	t.Helper()
	env, cfg, err := Start(options...)
	if errors.Is(err, ErrNoAssets) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}
