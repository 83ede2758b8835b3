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

// A broken driver root through the real NVML path: the fake libnvidia-ml still loads, the
// broken files are skipped, and both outputs name each one and what is wrong with it.
func TestDetectBrokenRootInProcess(t *testing.T) {
	root := fakeNode(t)
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	if err := os.Remove(filepath.Join(lib, "libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/opt/gone/libcuda.so.550.54.15", filepath.Join(lib, "libcuda.so.1"))
	if err := os.Remove(filepath.Join(root, "usr/bin/nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	symlink(t, "nvidia-smi", filepath.Join(root, "usr/bin/nvidia-smi"))
	write(t, filepath.Join(root, "etc/ld.so.cache"), "ld.so-1.7.0\x00\xff\xff\xff\xff")
	want := []string{
		"/etc/ld.so.cache unreadable (old-format ld.so.cache truncated: 4294967295 entries need 51539607556 bytes, file has 16); searched the usual directories only",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> /opt/gone/libcuda.so.550.54.15: dangling symlink; not used",
		"/usr/bin/nvidia-smi -> nvidia-smi: symlink loop; not used",
	}

	r := nodeprobe(t, nil, "detect", "--driver-root", root)
	if r.code != exitOK {
		t.Fatalf("%v", r)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, "Warning: "+w+"\n") {
			t.Errorf("output lacks the warning %q:\n%s", w, r.stdout)
		}
	}

	r = nodeprobe(t, nil, "detect", "--driver-root", root, "-o", "json")
	var f driver.Finding
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil || r.code != exitOK {
		t.Fatalf("%v\n%v", err, r)
	}
	if !slices.Equal(f.Warnings, want) || len(f.GPUs) != 2 {
		t.Errorf("warnings:\n%q\nwant\n%q", f.Warnings, want)
	}
	// libnvidia-ml's only, in each library directory.
	if v := f.Config.Accelerators[driver.Resource].Volumes; len(v) != len(driver.LibraryMountDirs) || v[0].HostPath != "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" || v[1].HostPath != v[0].HostPath {
		t.Errorf("volumes %+v, want libnvidia-ml's only", v)
	}
}
