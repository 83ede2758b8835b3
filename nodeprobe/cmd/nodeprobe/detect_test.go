package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
)

// The whole real path: go-nvml dlopens the node's libnvidia-ml.so.1 (our fake, built with gcc)
// from under --driver-root and calls it.
func TestDetectWithRealLibrary(t *testing.T) {
	root := fakeNode(t)
	callLog := filepath.Join(t.TempDir(), "calls")
	r := nodeprobe(t, []string{"FAKE_NVML_LOG=" + callLog}, "detect", "--driver-root", root)
	if r.code != exitOK {
		t.Fatalf("%v", r)
	}
	// Only the functions the fake has were called, in this order, and NVML was shut down.
	want := []string{"nvmlInit_v2", "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetCount_v2"}
	for range 2 {
		want = append(want, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo")
	}
	want = append(want, "nvmlShutdown")
	if got := calls(t, callLog); !slices.Equal(got, want) {
		t.Errorf("NVML calls:\n%q\nwant\n%q", got, want)
	}
	// The human output, with the temp dir shown as /host, is docs/nodeprobe.md's sample.
	golden(t, "detect.golden", strings.ReplaceAll(r.stdout, root, "/host"))

	r = nodeprobe(t, nil, "detect", "--driver-root", root, "-o", "json")
	var f driver.Finding
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil || r.code != exitOK {
		t.Fatalf("%v\n%v", err, r)
	}
	if f.DriverVersion != "550.54.15" || f.CUDADriverVersion != "12.4" || len(f.GPUs) != 2 ||
		f.GPUs[1].UUID != "GPU-fa4e0000-0000-0000-0000-000000000001" || f.GPUs[1].MemoryTotal != 85520809984 ||
		f.GPUs[0].Name != "Fake NVIDIA H100 80GB HBM3" {
		t.Errorf("finding: %+v", f)
	}
	var paths []string
	for _, v := range f.Config.Accelerators[driver.Resource].Volumes {
		paths = append(paths, v.HostPath+" -> "+v.MountPath)
	}
	wantPaths := []string{
		"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 -> /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
		"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 -> /usr/lib64/libnvidia-ml.so.1",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> /usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> /usr/lib64/libcuda.so.1",
		"/usr/bin/nvidia-smi -> /usr/bin/nvidia-smi",
	}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("volumes:\n%q\nwant\n%q", paths, wantPaths)
	}

	r = nodeprobe(t, nil, "detect", "--driver-root", root, "-o", "yaml", "--legacy-resource")
	if r.code != exitOK || !strings.Contains(r.stdout, driver.LegacyResource+":") || !strings.Contains(r.stdout, "driverVersion: 550.54.15") {
		t.Errorf("yaml with the legacy resource: %v", r)
	}
}

// On a node whose runtime gives containers the driver (the NVIDIA container toolkit as
// containerd's default), detect says so, with the file that says it, and the config mounts
// nothing.
func TestDetectRuntimeGivesTheDriver(t *testing.T) {
	root := fakeNode(t)
	write(t, filepath.Join(root, "etc/containerd/config.toml"), "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"nvidia\"\n")
	r := nodeprobe(t, nil, "detect", "--driver-root", root)
	if r.code != exitOK {
		t.Fatalf("exit %d: %v", r.code, r)
	}
	for _, want := range []string{
		"Runtime:  nvidia is containerd's default runtime (/etc/containerd/config.toml): it gives containers the driver, so the config mounts nothing\n",
		"      runtime: nvidia-container-toolkit\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "volumes:") {
		t.Errorf("the config mounts the driver the runtime gives:\n%s", r.stdout)
	}
}

// NVML refusing to start (here: "driver not loaded") still prints the paths and the config,
// exits 4, and calls nothing after the failed init (the fake aborts if anything is).
func TestDetectInitFailsInProcess(t *testing.T) {
	root := fakeNode(t)
	callLog := filepath.Join(t.TempDir(), "calls")
	r := nodeprobe(t, []string{"FAKE_NVML_LOG=" + callLog, "FAKE_NVML_INIT=9"}, "detect", "--driver-root", root, "-o", "json")
	if r.code != exitNoNVML {
		t.Fatalf("want exit %d: %v", exitNoNVML, r)
	}
	if got := calls(t, callLog); !slices.Equal(got, []string{"nvmlInit_v2"}) {
		t.Errorf("NVML calls after a failed init: %q", got)
	}
	var f driver.Finding
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
		t.Fatal(err)
	}
	if f.DriverVersion != "550.54.15" || len(f.Config.Accelerators[driver.Resource].Volumes) != 5 || !strings.Contains(f.NVMLError, "kernel module") {
		t.Errorf("finding: %+v", f)
	}
	if !strings.Contains(r.stderr, "NVIDIA driver files found, but NVML did not answer") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestDetectNoDriverInProcess(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"), "")
	r := nodeprobe(t, nil, "detect", "--driver-root", root)
	if r.code != exitNoDriver || r.stdout != "" {
		t.Fatalf("want exit %d and no output: %v", exitNoDriver, r)
	}
	for _, want := range []string{
		"no NVIDIA driver found on this node; looked in: /etc/ld.so.cache, /usr/lib/x86_64-linux-gnu, /usr/lib64, /home/kubernetes/bin/nvidia/lib64, /usr/lib/nvidia-NNN, /usr/lib/nvidia, /usr/local/nvidia/lib64, /run/nvidia/driver/etc/ld.so.cache",
		"(under " + root + ")",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}
}

// A libnvidia-ml.so.1 that is not a loadable library: dlopen fails inside go-nvml's Init, which
// must end as "no driver", not as a crash from a call into the missing library.
func TestDetectBrokenLibraryInProcess(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "usr/lib64/libnvidia-ml.so.1"), "not an ELF file")
	r := nodeprobe(t, nil, "detect", "--driver-root", root)
	if r.code != exitNoDriver || !strings.Contains(r.stderr, "/usr/lib64/libnvidia-ml.so.1 is there but could not be loaded") {
		t.Fatalf("%v", r)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"detect", "--nope"}, {"detect", "extra"}, {"detect", "-o", "xml"}, {"publish"}, {"publish", "--namespace=a", "--configmap=b", "--node=c", "--interval=0s"}} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "nodeprobe --help") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"--help"}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "publish") {
		t.Errorf("--help: exit %d: %s", code, stdout.String())
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", file, got)
	}
}
