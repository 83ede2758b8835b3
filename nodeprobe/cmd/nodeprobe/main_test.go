package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mlkube/mlkube/internal/controlplane"
)

// These tests run nodeprobe as a separate process (this test binary, re-executed with
// NODEPROBE_RUN_MAIN set): NVML runs for real there, dlopen and all, and a crash (a symbol
// lookup error after a failed init, a bad library) ends that process, not the test run.
const runMainEnv = "NODEPROBE_RUN_MAIN"

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) != "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

// result is how a nodeprobe process ended.
type result struct {
	code           int
	stdout, stderr string
}

// nodeprobe runs the command to its end (at most a minute), with extra environment variables.
func nodeprobe(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := command(env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	return cmd
}

// String says how a process ended, signals included, for failure messages.
func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

var (
	fakeOnce sync.Once
	fakeLib  string
	fakeErr  error
)

// fakeNVML builds testdata/fake_nvml.c into a shared library once per test run.
func fakeNVML(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the tests of the real NVML path build a fake libnvidia-ml.so.1 with it")
	}
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fake-nvml-")
		if err != nil {
			fakeErr = err
			return
		}
		fakeLib = filepath.Join(dir, "libnvidia-ml.so")
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", fakeLib, filepath.Join("testdata", "fake_nvml.c")).CombinedOutput()
		if err != nil {
			fakeErr = fmt.Errorf("gcc: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeLib
}

// fakeNode is a Debian-like node root with the fake NVML as its driver: the library under its
// full version with the SONAME link, libcuda beside it, nvidia-smi in /usr/bin.
func fakeNode(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	installDriver(t, root, "550.54.15")
	for _, f := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "/usr/bin/nvidia-smi", "/usr/bin/sh"} {
		write(t, filepath.Join(root, f), "")
	}
	symlink(t, "libcuda.so.550.54.15", filepath.Join(root, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"))
	return root
}

// installDriver puts the fake libnvidia-ml under version into root and points the SONAME
// link at it, as a driver update does.
func installDriver(t *testing.T, root, version string) {
	t.Helper()
	dir := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	data, err := os.ReadFile(fakeNVML(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "libnvidia-ml.so."+version), string(data))
	link := filepath.Join(dir, "libnvidia-ml.so.1")
	_ = os.Remove(link)
	symlink(t, "libnvidia-ml.so."+version, link)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// calls reads the fake NVML's call log.
func calls(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// The control plane, for the publish tests, started by the first test that needs it.
var (
	env      *envtest.Environment
	cfg      *rest.Config
	envOnce  sync.Once
	envError error
)

func controlPlane(t *testing.T) *rest.Config {
	t.Helper()
	envOnce.Do(func() { env, cfg, envError = controlplane.Start() })
	if errors.Is(envError, controlplane.ErrNoAssets) {
		t.Skip(envError)
	}
	if envError != nil {
		t.Fatal(envError)
	}
	return cfg
}

// stopWith sends sig to a running nodeprobe and waits for it to end, at most within timeout.
func stopWith(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, timeout time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("nodeprobe still running %v after %v", timeout, sig)
	}
	return cmd.ProcessState.ExitCode(), time.Since(start)
}
