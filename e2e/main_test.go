//go:build e2e

// Package e2e runs mlkube for real: a kind cluster made by devctl from the offline node image,
// the operator in it, real pods. `make e2e` gives it a Docker engine, the node image and the
// devctl binary, and runs it.
package e2e

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
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
	// name is the suite's cluster; MLKUBE_E2E_NAME gives another, so that one test can run
	// (go test -tags e2e -run TestX ./e2e/) beside a cluster of the default name.
	name = cmp.Or(os.Getenv("MLKUBE_E2E_NAME"), "mlkube-e2e")
)

// The suite shares one cluster: TestMain creates it with `devctl up` (TestUp checks what that
// did), every test runs its jobs in a namespace of its own, and TestMain deletes the cluster
// with `devctl down` at the end and checks that nothing is left.
var (
	coldUp     string        // the output of the first devctl up
	coldUpTook time.Duration // and how long it took
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
	code := func() int {
		// Whatever happens, leave no cluster behind.
		defer os.RemoveAll(dir)
		var upErr error
		// No --image: up chooses the node image by itself, as a user's first `devctl up` does.
		coldUp, coldUpTook, upErr = devctlOut("up", "--name", name)
		if upErr != nil {
			fmt.Fprintf(os.Stderr, "e2e: devctl up failed (%v) after %.1fs:\n%s", upErr, coldUpTook.Seconds(), coldUp)
			_, _, _ = devctlOut("down", "--name", name)
			return 1
		}
		code := m.Run()
		if err := down(); err != nil {
			fmt.Fprintf(os.Stderr, "--- FAIL: devctl down: %v\n", err)
			code = 1
		}
		writeTimings()
		return code
	}()
	os.Exit(code)
}

// down deletes the cluster and checks that devctl down left nothing behind: no cluster listed,
// no node container.
func down() error {
	out, took, err := devctlOut("down", "--name", name)
	fmt.Printf("$ devctl down --name %s  (%.1fs, err=%v)\n%s", name, took.Seconds(), err, out)
	if err != nil {
		return err
	}
	// The registry serves other clusters: down keeps it, with what was pushed, and says so.
	if !strings.Contains(out, "Kept the local registry localhost:5001 and its ") {
		return fmt.Errorf("devctl down did not say what became of the local registry")
	}
	clusters, err := kindcluster.NewProvider().List()
	if err != nil {
		return err
	}
	for _, cl := range clusters {
		if cl == name {
			return fmt.Errorf("cluster %s still listed after devctl down", name)
		}
	}
	left, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+name).Output()
	if strings.TrimSpace(string(left)) != "" {
		return fmt.Errorf("containers left after devctl down: %s", left)
	}
	return nil
}

// devctlOut runs devctl and returns its output (stdout and stderr together) and duration.
func devctlOut(args ...string) (string, time.Duration, error) {
	var out bytes.Buffer
	cmd := exec.Command(devctl, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	return out.String(), time.Since(start), err
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
	c, err := client.New(cfg, client.Options{Scheme: clusterScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// clusterScheme knows the jobs' kinds, the built-in kinds and CRDs.
func clusterScheme(t *testing.T) *kruntime.Scheme {
	t.Helper()
	scheme := operator.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
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

// registryInUse is held for reading while a test relies on the local registry's container
// staying up (TestAcrossNodes' devctl up, in the background), and for writing by the test that
// removes it to see devctl up start it again (TestUp).
var registryInUse sync.RWMutex

// timings are the durations the suite measured, for the docs (bin/e2e-timings.txt).
var timings struct {
	sync.Mutex
	lines []string
}

// timing records a duration for bin/e2e-timings.txt and the test log.
func timing(what string, d time.Duration) {
	timings.Lock()
	defer timings.Unlock()
	timings.lines = append(timings.lines, fmt.Sprintf("%-72s %6.1fs", what, d.Seconds()))
}

// writeTimings writes what timing recorded to bin/e2e-timings.txt of the checkout.
func writeTimings() {
	timings.Lock()
	defer timings.Unlock()
	if len(timings.lines) == 0 {
		return
	}
	host, _ := os.Hostname()
	text := fmt.Sprintf("# make e2e, %s on %s (%d CPUs), node image %s\n%s\n",
		time.Now().UTC().Format(time.RFC3339), host, runtime.NumCPU(), nodeImage, strings.Join(timings.lines, "\n"))
	path := filepath.Join("..", "bin", "e2e-timings.txt")
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(text), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: writing %s: %v\n", path, err)
	}
	fmt.Print(text)
}
