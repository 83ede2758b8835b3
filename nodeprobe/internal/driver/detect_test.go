package driver

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/accelerator"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// dgx is go-nvml's fake DGX A100 (8 GPUs, driver 550.54.15, CUDA 12.4) with UUIDs that do not
// change between runs.
func dgx() *dgxa100.Server {
	s := dgxa100.New()
	for i, d := range s.Devices {
		d.(*dgxa100.Device).UUID = fmt.Sprintf("GPU-00000000-0000-0000-0000-00000000000%d", i)
	}
	return s
}

// detect runs Detect on a layout with a mock NVML and records which file it loaded.
func detect(t *testing.T, l layout, cache []byte, lib NVML, legacy bool) (f *Finding, loaded string, root string, err error) {
	t.Helper()
	root = l.write(t)
	if cache != nil {
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.cache"), cache, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err = Detect(Options{Root: root, Legacy: legacy, Open: func(p string) NVML {
		loaded = p
		return lib
	}})
	return f, loaded, root, err
}

// Each layout's finding (paths, how each was found, the config) is a golden file in
// testdata/layouts; the test also checks what must hold whatever the goldens say.
func TestDetectLayouts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout layout
		cache  []byte
		// loads is the file NVML must be loaded from, as a host path.
		loads string
		// runtime is the file that says the runtime gives containers the driver, if any.
		runtime string
	}{
		{name: "debian", layout: debianLayout, cache: debianCache(), loads: lib + "/libnvidia-ml.so.550.54.15"},
		{name: "rhel", layout: rhelLayout, loads: "/usr/lib64/libnvidia-ml.so.550.54.15"},
		{name: "gke", layout: gkeLayout, loads: "/home/kubernetes/bin/nvidia/lib64/libnvidia-ml.so.550.54.15"},
		{name: "versioned", layout: versionedLayout, loads: "/usr/lib/nvidia-550/libnvidia-ml.so.550.54.15"},
		{name: "gpu-operator", layout: gpuOperatorLayout, loads: "/run/nvidia/driver" + lib + "/libnvidia-ml.so.550.54.15"},
		{name: "debian-packages", layout: debianPackagesLayout, loads: lib + "/nvidia/current/libnvidia-ml.so.550.54.15"},
		{name: "gpu-container", layout: gpuContainerLayout, loads: lib + "/libnvidia-ml.so.1"},
		{name: "gpu-container-before", layout: gpuContainerBeforeLayout, loads: "/usr/local/nvidia/lib64/libnvidia-ml.so.1"},
		{name: "kind-runc", layout: debianLayout.with(kindContainerd), cache: debianCache(), loads: lib + "/libnvidia-ml.so.550.54.15"},
		{name: "gpu-operator-toolkit", layout: gpuOperatorToolkitLayout, loads: "/run/nvidia/driver" + lib + "/libnvidia-ml.so.550.54.15",
			runtime: "/etc/containerd/config.toml"},
		{name: "toolkit-dropin", layout: toolkitDropInLayout, cache: debianCache(), loads: lib + "/libnvidia-ml.so.550.54.15",
			runtime: "/etc/containerd/conf.d/99-nvidia.toml"},
		{name: "cdi", layout: cdiLayout, loads: "/usr/lib64/libnvidia-ml.so.550.54.15", runtime: "/var/run/cdi/nvidia.yaml"},
		{name: "crio-toolkit", layout: crioLayout, loads: "/usr/lib64/libnvidia-ml.so.550.54.15", runtime: "/etc/crio/crio.conf.d/99-nvidia.conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := dgx()
			f, loaded, root, err := detect(t, tc.layout, tc.cache, server, false)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tc.loads); loaded != want {
				t.Errorf("NVML loaded from %s, want %s", loaded, want)
			}
			if len(server.ShutdownCalls()) != 1 {
				t.Errorf("Shutdown called %d times, want once", len(server.ShutdownCalls()))
			}
			if f.DriverVersion != "550.54.15" || f.CUDADriverVersion != "12.4" || len(f.GPUs) != 8 {
				t.Errorf("driver %q CUDA %q, %d GPUs; want 550.54.15, 12.4, 8", f.DriverVersion, f.CUDADriverVersion, len(f.GPUs))
			}
			if g := f.GPUs[3]; g.Index != 3 || g.Name != "Mock NVIDIA A100-SXM4-40GB" || g.MemoryTotal != 42949672960 || !strings.HasSuffix(g.UUID, "3") {
				t.Errorf("GPU 3: %+v", g)
			}
			if len(f.Warnings) > 0 {
				t.Errorf("warnings: %q", f.Warnings)
			}
			switch {
			case tc.runtime == "" && f.Runtime != nil:
				t.Errorf("the runtime gives the driver, says %+v; it does not", f.Runtime)
			case tc.runtime != "" && (f.Runtime == nil || f.Runtime.Path != tc.runtime):
				t.Errorf("runtime %+v, want one found in %s", f.Runtime, tc.runtime)
			}
			checkConfig(t, f, root)
			f.DriverRoot = "ROOT"
			golden(t, filepath.Join("testdata", "layouts", tc.name+".yaml"), f)
		})
	}
}

// checkConfig checks what every published config must be: valid for the operator, and either
// nothing mounted where the runtime gives the driver, or each driver file found mounted on its
// own, from a host path that exists on the node (and carries no trace of where nodeprobe read
// it), into every library directory of the image's own (or /usr/bin for a tool), with no env:
// a GPU container keeps its image's PATH and LD_LIBRARY_PATH.
func checkConfig(t *testing.T, f *Finding, root string) {
	t.Helper()
	data, err := yaml.Marshal(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accelerator.Parse(data); err != nil {
		t.Errorf("the operator refuses the config: %v\n%s", err, data)
	}
	acc, ok := f.Config.Accelerators[Resource]
	if !ok || len(f.Config.Accelerators) != 1 {
		t.Fatalf("config resources: %v, want only %s", keys(f.Config.Accelerators), Resource)
	}
	if len(acc.EnvVars) > 0 {
		t.Errorf("env %v: a GPU container must keep its image's own", acc.EnvVars)
	}
	if f.Runtime != nil {
		if acc.Runtime != accelerator.RuntimeNVIDIA || len(acc.Volumes) > 0 {
			t.Errorf("the runtime gives the driver, yet the config is %+v", acc)
		}
		return
	}
	want := map[string]string{} // mount path: host path
	for _, l := range f.Libraries {
		for _, dir := range LibraryMountDirs {
			want[dir+"/"+l.Name] = l.Path
		}
	}
	for _, b := range f.Binaries {
		want["/usr/bin/"+b.Name] = b.Path
	}
	got := map[string]string{}
	for _, v := range acc.Volumes {
		got[v.MountPath] = v.HostPath
		if strings.HasPrefix(v.HostPath, root) {
			t.Errorf("volume %s: hostPath %s carries the driver root %s", v.Name, v.HostPath, root)
		}
		// As the kubelet would see it on the node: links followed inside the root.
		if !Root(root).IsFile(v.HostPath) {
			t.Errorf("volume %s: hostPath %s is not a file on the node", v.Name, v.HostPath)
		}
	}
	if !maps.Equal(got, want) || len(acc.Volumes) != len(want) {
		t.Errorf("mounts (mount path: host path) %v, want %v", got, want)
	}
	for _, l := range f.Libraries {
		if strings.HasSuffix(l.Name, ".so") || strings.Contains(l.Path, "i386") {
			t.Errorf("published %s: the linker's link or a 32-bit library", l.Path)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// golden compares v as YAML with a file in testdata, or rewrites it with -update.
func golden(t *testing.T, file string, v any) {
	t.Helper()
	got, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", file, got)
	}
}

func TestDetectLegacyResource(t *testing.T) {
	f, _, _, err := detect(t, gkeLayout, nil, dgx(), true)
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.Config.Accelerators[Resource], f.Config.Accelerators[LegacyResource]
	if len(a.Volumes) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("legacy resource gets %+v, want the same as %s: %+v", b, Resource, a)
	}
}

func TestDetectNoDriver(t *testing.T) {
	for name, l := range map[string]layout{
		"empty root":       {},
		"cpu node":         {lib + "/libc.so.6": "", "/usr/bin/sh": ""},
		"dangling link":    {lib + "/libnvidia-ml.so.1": "-> libnvidia-ml.so.550.54.15"},
		"only 32-bit":      {"/usr/lib/i386-linux-gnu/libnvidia-ml.so.1": ""},
		"only linker link": {lib + "/libnvidia-ml.so": ""},
	} {
		t.Run(name, func(t *testing.T) {
			// A mock with nothing set: any NVML call at all would panic.
			_, loaded, root, err := detect(t, l, nil, &mock.Interface{}, false)
			var nd *NoDriverError
			if !errors.As(err, &nd) {
				t.Fatalf("err = %v, want a NoDriverError", err)
			}
			if loaded != "" {
				t.Errorf("loaded %s", loaded)
			}
			msg := err.Error()
			for _, want := range []string{"no NVIDIA driver found on this node; looked in: /etc/ld.so.cache, " + lib, "/home/kubernetes/bin/nvidia/lib64", "/run/nvidia/driver/usr/lib64", "(under " + root + ")"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}

// A libnvidia-ml that does not load is no driver; nothing else may be asked of NVML.
func TestDetectUnloadableLibrary(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, _, _, err := detect(t, debianLayout, debianCache(), lib, false)
	var nd *NoDriverError
	if !errors.As(err, &nd) || nd.Unloadable != "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" {
		t.Fatalf("err = %v, want a NoDriverError naming the unloadable library", err)
	}
	if !strings.Contains(err.Error(), "libnvidia-ml.so.1 is there but could not be loaded") {
		t.Errorf("message: %v", err)
	}
}

// NVML failing to start (no access to /dev/nvidia*, module not loaded) still gives the paths
// and the config, the version from the library's name, and never another NVML call.
func TestDetectInitFails(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_LIB_RM_VERSION_MISMATCH, nvml.Return(77)} {
		t.Run(fmt.Sprint(int32(ret)), func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
			f, _, root, err := detect(t, debianLayout, debianCache(), lib, false)
			var ne *NVMLError
			if !errors.As(err, &ne) || f == nil {
				t.Fatalf("err = %v, finding %v; want an NVMLError and a finding", err, f)
			}
			if !strings.Contains(f.NVMLError, fmt.Sprintf("NVML error %d", int32(ret))) {
				t.Errorf("nvmlError %q", f.NVMLError)
			}
			if f.DriverVersion != "550.54.15" || len(f.GPUs) != 0 {
				t.Errorf("driver %q from the file name, %d GPUs", f.DriverVersion, len(f.GPUs))
			}
			checkConfig(t, f, root)
		})
	}
}

// A GPU that does not answer is listed with its error; the others are still there.
func TestDetectBrokenGPU(t *testing.T) {
	server := dgx()
	broken := server.Devices[2].(*dgxa100.Device)
	broken.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	server.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 5 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return server.Devices[i], nvml.SUCCESS
	}
	f, _, _, err := detect(t, rhelLayout, nil, server, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.GPUs) != 8 || f.GPUs[2].Error == "" || f.GPUs[2].UUID == "" || f.GPUs[5].Error == "" || f.GPUs[4].Error != "" {
		t.Errorf("GPUs: %+v", f.GPUs)
	}
}

func TestDetectSystemQueryFails(t *testing.T) {
	server := dgx()
	server.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	f, _, _, err := detect(t, rhelLayout, nil, server, false)
	var ne *NVMLError
	if !errors.As(err, &ne) || !strings.Contains(f.NVMLError, "nvmlDeviceGetCount") {
		t.Fatalf("err = %v, nvmlError %q", err, f.NVMLError)
	}
	if len(server.ShutdownCalls()) != 1 {
		t.Error("NVML not shut down after a failed query")
	}
}

func TestPickSOName(t *testing.T) {
	for _, tc := range []struct {
		base, version string
		names         []string
		want          string
	}{
		{"libcuda", "", []string{"libcuda.so", "libcuda.so.550.54.15", "libcuda.so.1"}, "libcuda.so.1"},
		{"libnvidia-nvvm", "", []string{"libnvidia-nvvm.so.4.0.0", "libnvidia-nvvm.so.4"}, "libnvidia-nvvm.so.4"},
		{"libnvidia-gpucomp", "550.54.15", []string{"libnvidia-gpucomp.so.550.90.07", "libnvidia-gpucomp.so.550.54.15"}, "libnvidia-gpucomp.so.550.54.15"},
		{"libnvidia-gpucomp", "", []string{"libnvidia-gpucomp.so.550.54.15", "libnvidia-gpucomp.so.550.90.07"}, "libnvidia-gpucomp.so.550.90.07"},
		{"libnvidia-pkcs11", "", []string{"libnvidia-pkcs11-openssl3.so.550.54.15"}, ""},
		{"libcuda", "", []string{"libcuda.so", "libcudart.so.12", "libcuda.so.1.bak"}, ""},
	} {
		got, _ := pickSOName(tc.base, tc.names, tc.version)
		if got != tc.want {
			t.Errorf("pickSOName(%s, %q) = %q, want %q", tc.base, tc.names, got, tc.want)
		}
	}
}

func TestVolumeName(t *testing.T) {
	for in, want := range map[string]string{
		"libcuda.so.1":                    "nvidia-lib-libcuda-so-1",
		"libGLX_nvidia.so.0":              "nvidia-lib-libglx-nvidia-so-0",
		strings.Repeat("x", 80) + ".so.1": strings.Repeat("x", 58) + "-so-1",
	} {
		if got := volumeName("nvidia-lib-", in); got != want {
			t.Errorf("volumeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A corrupt ld.so.cache is reported, and the usual directories still find the driver.
func TestDetectCorruptLDCache(t *testing.T) {
	f, _, _, err := detect(t, debianLayout, []byte("glibc-ld.so.cache1.1 and then garbage"), dgx(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0], "/etc/ld.so.cache unreadable") || f.Libraries[0].FoundBy != FoundBySearch {
		t.Errorf("warnings %q, libnvidia-ml found by %s", f.Warnings, f.Libraries[0].FoundBy)
	}
	_, _, _, err = detect(t, layout{}, []byte("ld.so-1.7.0"), &mock.Interface{}, false)
	if err == nil || !strings.Contains(err.Error(), "/etc/ld.so.cache unreadable") {
		t.Errorf("no driver, corrupt cache: %v", err)
	}
}
