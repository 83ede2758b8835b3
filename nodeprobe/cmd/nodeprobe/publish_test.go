package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mlkube/mlkube/nodeprobe/internal/publish"
	"github.com/mlkube/mlkube/operator/accelerator"
)

// The DaemonSet mode end to end: the real NVML path against a real apiserver, probing again
// and again (each probe loads and shuts NVML down), exiting 0 at once on SIGTERM.
func TestPublishUntilSIGTERM(t *testing.T) {
	k8s, kubeconfig := cluster(t, "publish")
	root := fakeNode(t)
	callLog := filepath.Join(t.TempDir(), "calls")
	cmd, out := start(t, []string{"FAKE_NVML_LOG=" + callLog}, "publish", "--kubeconfig", kubeconfig,
		"--namespace", "publish", "--configmap", "accelerators", "--node", "gpu-node", "--driver-root", root, "--interval", "100ms")

	waitFor(t, out, "the ConfigMap and the annotation", func() error {
		var cm corev1.ConfigMap
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: "publish", Name: "accelerators"}, &cm); err != nil {
			return err
		}
		cfg, err := accelerator.Parse([]byte(cm.Data[publish.KeyConfig]))
		if err != nil {
			return err
		}
		if n := accelerator.HostPaths(cfg.Accelerators["nvidia.com/gpu"]); n != 3 {
			return fmt.Errorf("%d driver files mounted, want 3", n)
		}
		var n corev1.Node
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: "gpu-node"}, &n); err != nil {
			return err
		}
		if !strings.Contains(n.Annotations[accelerator.NodeAnnotation], `"gpus":2`) {
			return fmt.Errorf("annotation %q", n.Annotations[accelerator.NodeAnnotation])
		}
		return nil
	})
	waitFor(t, out, "three probes", func() error {
		if n := strings.Count(strings.Join(calls(t, callLog), " "), "nvmlShutdown"); n < 3 {
			return fmt.Errorf("%d probes so far", n)
		}
		return nil
	})
	code, took := stopWith(t, cmd, syscall.SIGTERM, 5*time.Second)
	if code != 0 || took > 2*time.Second {
		t.Errorf("after SIGTERM: exit %d in %v, want 0 at once\n%s", code, took, out)
	}
}

// A driver update swaps libnvidia-ml.so.1 for a new file; the old one stays loaded in the
// process, so nodeprobe exits (0) for the kubelet to restart it with the new one.
func TestPublishExitsWhenTheDriverChanges(t *testing.T) {
	_, kubeconfig := cluster(t, "update")
	root := fakeNode(t)
	callLog := filepath.Join(t.TempDir(), "calls")
	cmd, out := start(t, []string{"FAKE_NVML_LOG=" + callLog}, "publish", "--kubeconfig", kubeconfig,
		"--namespace", "update", "--configmap", "accelerators", "--node", "gpu-node-2", "--driver-root", root, "--interval", "100ms")
	waitFor(t, out, "a first probe", func() error {
		if len(calls(t, callLog)) == 0 {
			return fmt.Errorf("no NVML call yet")
		}
		return nil
	})
	installDriver(t, root, "550.90.07")
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running after the driver changed\n%s", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(out.String(), "libnvidia-ml changed") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestPublishOnceWithoutDriver(t *testing.T) {
	k8s, kubeconfig := cluster(t, "cpu")
	r := nodeprobe(t, nil, "publish", "--once", "--kubeconfig", kubeconfig,
		"--namespace", "cpu", "--configmap", "accelerators", "--node", "cpu-node", "--driver-root", t.TempDir())
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	var n corev1.Node
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: "cpu-node"}, &n); err != nil {
		t.Fatal(err)
	}
	if a := n.Annotations[accelerator.NodeAnnotation]; !strings.HasPrefix(a, `{"gpu":false,"reason":"no NVIDIA driver found on this node`) {
		t.Errorf("annotation %q", a)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: "cpu", Name: "accelerators"}, &cm); err == nil {
		t.Error("a node without a GPU created the ConfigMap")
	}
}

// cluster gives a test the control plane's client, a namespace and a node named after it, and
// a kubeconfig file for nodeprobe.
func cluster(t *testing.T, ns string) (client.Client, string) {
	t.Helper()
	cfg := controlPlane(t)
	k8s, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gpu-node", "gpu-node-2", "cpu-node"} {
		if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	user, err := env.AddUser(envtest.User{Name: "nodeprobe-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return k8s, file
}

// start runs nodeprobe in the background; the test's end kills it if it still runs.
func start(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := command(env, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return cmd, out
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, out *syncBuffer, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %v\nnodeprobe's output:\n%s", what, err, out)
}
