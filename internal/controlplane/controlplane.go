// Package controlplane starts the real kube-apiserver and etcd that mlkube's tests run against
// (envtest), built from Go modules by hack/control-plane.sh, with mlkube's CRDs installed.
package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Start starts etcd and kube-apiserver with the CRDs of operator/config/crd installed.
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
	return env, cfg, nil
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
