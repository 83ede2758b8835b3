//go:build e2e

// Package e2e runs mlkube for real: a kind cluster made by devctl from the offline node image,
// the operator in it, real pods. `make e2e` gives it a Docker engine, the node image and the
// devctl binary, and runs it.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/mlkube/mlkube/operator"
)

var (
	devctl    = os.Getenv("MLKUBE_DEVCTL")     // the devctl binary under test
	nodeImage = os.Getenv("MLKUBE_NODE_IMAGE") // the kind node image to use
	name      = "mlkube-e2e"
)

func TestMain(m *testing.M) {
	if devctl == "" || nodeImage == "" {
		fmt.Fprintln(os.Stderr, "e2e: MLKUBE_DEVCTL and MLKUBE_NODE_IMAGE must be set; run `make e2e`")
		os.Exit(1)
	}
	ctrllog.SetLogger(logr.Discard())
	// kind writes the cluster's context into $KUBECONFIG: keep the user's own config out of it.
	dir, err := os.MkdirTemp("", "mlkube-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("KUBECONFIG", filepath.Join(dir, "kubeconfig"))
	code := m.Run()
	// Whatever happened, leave no cluster behind.
	_ = exec.Command(devctl, "down", "--name", name).Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs devctl, streaming its output into the test log, and returns the output and duration.
func run(t *testing.T, args ...string) (string, time.Duration, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(devctl, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	t.Logf("$ devctl %s  (%.1fs, err=%v)\n%s", strings.Join(args, " "), took.Seconds(), err, out.String())
	return out.String(), took, err
}

// clusterClient talks to the e2e cluster with the kubeconfig kind gives.
func clusterClient(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	raw, err := kindcluster.NewProvider().KubeConfig(name, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	scheme := operator.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}
