package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/accelerator"
)

// Broken driver roots, as half-removed drivers, interrupted updates and bad images leave them.
// Whatever the damage, Detect must not crash, must name the path and what is wrong, and a
// finding that skipped files must say so (Degraded), since publishing relies on that.

// detectBroken runs Detect on a layout with the DGX mock; NVML must not be asked when
// mustNotLoad (a mock with nothing set panics on any call).
func detectBroken(t *testing.T, l layout, cache []byte, mustNotLoad bool) (*Finding, string, error) {
	t.Helper()
	var lib NVML = dgx()
	if mustNotLoad {
		lib = &mock.Interface{}
	}
	f, _, root, err := detect(t, l, cache, lib, false)
	return f, root, err
}

// The driver is found, but some of its files are broken: they are left out of the config, and
// the finding is degraded and says which and why.
func TestDetectSkipsBrokenDriverFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout layout
		cache  []byte
		// warning must be among the finding's warnings, word for word.
		warning string
		// missing are files of debianLayout's finding that must be gone from it.
		missing []string
	}{
		{
			name:    "dangling libcuda",
			layout:  debianLayout.with(layout{lib + "/libcuda.so.1": "-> /opt/gone/libcuda.so.550.54.15"}),
			cache:   debianCache(),
			warning: lib + "/libcuda.so.1 -> /opt/gone/libcuda.so.550.54.15: dangling symlink; not used",
			missing: []string{lib + "/libcuda.so.1"},
		},
		{
			name:    "dangling nvidia-smi",
			layout:  debianLayout.with(layout{"/usr/bin/nvidia-smi": "-> ../lib/nvidia/nvidia-smi"}),
			cache:   debianCache(),
			warning: "/usr/bin/nvidia-smi -> ../lib/nvidia/nvidia-smi: dangling symlink; not used",
			missing: []string{"/usr/bin/nvidia-smi"},
		},
		{
			name: "symlink loop",
			layout: debianLayout.with(layout{
				lib + "/libcudadebugger.so.1":    "-> libcudadebugger.so.loop",
				lib + "/libcudadebugger.so.loop": "-> libcudadebugger.so.1",
			}),
			cache:   debianCache(),
			warning: lib + "/libcudadebugger.so.1 -> libcudadebugger.so.loop: symlink loop; not used",
			missing: []string{lib + "/libcudadebugger.so.1"},
		},
		{
			// A library directory that loops is met while looking for the libraries this
			// driver lacks (libnvidia-cfg, ...): nothing is missing, but the search was not
			// complete.
			name:    "directory loop",
			layout:  debianLayout.with(layout{"/usr/lib64": "-> lib64"}),
			cache:   debianCache(),
			warning: "cannot list /usr/lib64: symlink loop",
		},
		{
			name:    "truncated ld.so.cache",
			layout:  debianLayout,
			cache:   debianCache()[:100],
			warning: "/etc/ld.so.cache unreadable (ld.so.cache truncated: 4 entries need 144 bytes, file has 100); searched the usual directories only",
		},
		{
			name:    "garbage ld.so.cache",
			layout:  debianLayout,
			cache:   bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0}, 4096),
			warning: "/etc/ld.so.cache unreadable (not an ld.so.cache: unknown magic); searched the usual directories only",
		},
		{
			name:    "ld.so.cache loop",
			layout:  debianLayout.with(layout{"/etc/ld.so.cache": "-> ld.so.cache"}),
			warning: "/etc/ld.so.cache unreadable (symlink loop); searched the usual directories only",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := detectBroken(t, tc.layout, tc.cache, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(f.Warnings, tc.warning) || !f.Degraded() {
				t.Errorf("warnings %q (degraded %v), want %q among them", f.Warnings, f.Degraded(), tc.warning)
			}
			checkBrokenFinding(t, f, debianLayout, debianCache(), tc.missing)
		})
	}
}

// checkBrokenFinding compares a finding on a broken root with the finding on the same layout
// intact: the same files but missing, and a config the operator takes whose volumes are the
// intact config's, none of them for a missing file.
func checkBrokenFinding(t *testing.T, f *Finding, intact layout, cache []byte, missing []string) {
	t.Helper()
	good, _, _, err := detect(t, intact, cache, dgx(), false)
	if err != nil || good.Degraded() {
		t.Fatalf("the intact layout: %v, warnings %q", err, good.Warnings)
	}
	var want, got []string
	for _, l := range slices.Concat(good.Libraries, good.Binaries) {
		if !slices.Contains(missing, l.Path) {
			want = append(want, l.Path)
		}
	}
	for _, l := range slices.Concat(f.Libraries, f.Binaries) {
		got = append(got, l.Path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("files found:\n%q\nwant\n%q", got, want)
	}
	data, err := yaml.Marshal(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accelerator.Parse(data); err != nil {
		t.Errorf("the operator refuses the config: %v\n%s", err, data)
	}
	goodVolumes := good.Config.Accelerators[Resource].Volumes
	for _, v := range f.Config.Accelerators[Resource].Volumes {
		if slices.Contains(missing, v.HostPath) || !slices.Contains(goodVolumes, v) {
			t.Errorf("volume %+v: not one of the intact config's, or for a broken file", v)
		}
	}
}

// A broken libnvidia-ml is no driver: NVML is not loaded from it, and the "no driver" message
// says what is wrong with the file that is there.
func TestDetectBrokenNVMLIsNoDriver(t *testing.T) {
	for name, tc := range map[string]struct {
		layout layout
		want   string
	}{
		"dangling": {
			debianLayout.with(layout{lib + "/libnvidia-ml.so.1": "-> /x/libnvidia-ml.so.550.54.15"}),
			lib + "/libnvidia-ml.so.1 -> /x/libnvidia-ml.so.550.54.15: dangling symlink; not used",
		},
		"loop": {
			debianLayout.with(layout{lib + "/libnvidia-ml.so.1": "-> libnvidia-ml.so.1"}),
			lib + "/libnvidia-ml.so.1 -> libnvidia-ml.so.1: symlink loop; not used",
		},
		"directory": {
			layout{"/usr/lib64/libnvidia-ml.so.1": "dir"},
			"/usr/lib64/libnvidia-ml.so.1: not a regular file; not used",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := detectBroken(t, tc.layout, nil, true)
			var nd *NoDriverError
			if !errors.As(err, &nd) || !slices.Contains(nd.Warnings, tc.want) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a NoDriverError saying %q", err, tc.want)
			}
		})
	}
}

// Files nodeprobe may not read. Root reads anything whatever its mode, so as root the probe
// runs in a child process as nobody (this test binary again, see TestMain).
func TestDetectUnreadableFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout layout
		cache  []byte
		// unreadable are made mode 000.
		unreadable []string
		warning    string
		noDriver   bool
		missing    []string
	}{
		{
			name:       "libcuda",
			layout:     debianLayout,
			cache:      debianCache(),
			unreadable: []string{lib + "/libcuda.so.550.54.15"},
			warning:    lib + "/libcuda.so.1 -> libcuda.so.550.54.15: cannot read (permission denied); not used",
			missing:    []string{lib + "/libcuda.so.1"},
		},
		{
			name:       "ld.so.cache",
			layout:     debianLayout,
			cache:      debianCache(),
			unreadable: []string{"/etc/ld.so.cache"},
			warning:    "/etc/ld.so.cache unreadable (permission denied); searched the usual directories only",
		},
		{
			name:       "tools directory",
			layout:     gkeLayout,
			unreadable: []string{"/home/kubernetes/bin/nvidia/bin"},
			warning:    "/home/kubernetes/bin/nvidia/bin/nvidia-smi: permission denied; not used",
			missing: []string{"/home/kubernetes/bin/nvidia/bin/nvidia-smi", "/home/kubernetes/bin/nvidia/bin/nvidia-debugdump",
				"/home/kubernetes/bin/nvidia/bin/nvidia-persistenced"},
		},
		{
			name:       "libnvidia-ml",
			layout:     debianLayout,
			cache:      debianCache(),
			unreadable: []string{lib + "/libnvidia-ml.so.550.54.15"},
			warning:    lib + "/libnvidia-ml.so.1 -> libnvidia-ml.so.550.54.15: cannot read (permission denied); not used",
			noDriver:   true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.layout.write(t)
			if tc.cache != nil {
				writeCache(t, root, tc.cache)
			}
			for _, p := range tc.unreadable {
				chmod(t, filepath.Join(root, p), 0)
			}
			out := detectUnprivileged(t, root)
			if tc.noDriver {
				if !out.NoDriver || !strings.Contains(out.Err, tc.warning) {
					t.Errorf("err %q (no driver: %v), want a NoDriverError saying %q", out.Err, out.NoDriver, tc.warning)
				}
				return
			}
			if out.Err != "" {
				t.Fatal(out.Err)
			}
			if f := out.Finding; !slices.Contains(f.Warnings, tc.warning) || !f.Degraded() {
				t.Errorf("warnings %q, want %q among them", f.Warnings, tc.warning)
			}
			checkBrokenFinding(t, out.Finding, tc.layout, tc.cache, tc.missing)
		})
	}
}

func writeCache(t *testing.T, root string, cache []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.cache"), cache, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A driver directory that cannot be listed may hold anything, the C library included: its
// files are mounted one by one, never the directory whole.
func TestDetectUnlistableDirectoryIsNotMountedWhole(t *testing.T) {
	dir := "/opt/nvidia/lib64"
	l := driverFiles(dir, "libnvidia-ml=1", "libcuda=1").with(layout{dir + "/libc.so.6": ""})
	root := l.write(t)
	cache := ldCacheFile{entries: []LDCacheEntry{
		{Name: "libnvidia-ml.so.1", Path: dir + "/libnvidia-ml.so.1", Flags: x8664},
		{Name: "libcuda.so.1", Path: dir + "/libcuda.so.1", Flags: x8664},
	}}.newFormat()
	writeCache(t, root, cache)
	chmod(t, filepath.Join(root, dir), 0o111) // enter, not list, whoever owns it
	out := detectUnprivileged(t, root)
	if out.Err != "" {
		t.Fatal(out.Err)
	}
	var hostPaths []string
	for _, v := range out.Finding.Config.Accelerators[Resource].Volumes {
		if !slices.Contains(hostPaths, v.HostPath) { // each is mounted in several places
			hostPaths = append(hostPaths, v.HostPath)
		}
	}
	if want := []string{dir + "/libnvidia-ml.so.1", dir + "/libcuda.so.1"}; !slices.Equal(hostPaths, want) {
		t.Errorf("volumes' host paths %q, want the files %q", hostPaths, want)
	}
	if want := "cannot list " + dir + ": permission denied"; !slices.Contains(out.Finding.Warnings, want) {
		t.Errorf("warnings %q, want %q", out.Finding.Warnings, want)
	}
}

// chmod changes a file's mode until the test ends, when the temp dir must be removable.
func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(p, fi.Mode().Perm()) })
}

// unprivilegedEnv names the root a child process probes as nobody, printing an outcome.
const unprivilegedEnv = "DRIVER_TEST_DETECT_AS_NOBODY"

// nobody is the user the child runs as: not root, in no group that owns the files.
const nobody = 65534

func TestMain(m *testing.M) {
	if root := os.Getenv(unprivilegedEnv); root != "" {
		out := detectInProcess(root)
		out.EUID = os.Geteuid()
		_ = json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// outcome is what a probe found, as the child reports it.
type outcome struct {
	Finding  *Finding `json:"finding"`
	Err      string   `json:"error"`
	NoDriver bool     `json:"noDriver"`
	EUID     int      `json:"euid"`
}

func detectInProcess(root string) outcome {
	f, err := Detect(Options{Root: root, Open: func(string) NVML { return dgx() }})
	var out outcome
	out.Finding = f
	if err != nil {
		var nd *NoDriverError
		out.Err, out.NoDriver = err.Error(), errors.As(err, &nd)
	}
	return out
}

// detectUnprivileged probes root as a user without read permission on mode 000 files.
func detectUnprivileged(t *testing.T, root string) outcome {
	t.Helper()
	if os.Geteuid() != 0 {
		return detectInProcess(root)
	}
	// The child must reach the root (t.TempDir makes 0700 directories) and run a copy of this
	// binary (go test builds it in a 0700 directory).
	for _, d := range []string{root, filepath.Dir(root)} {
		chmod(t, d, 0o755)
	}
	exe := filepath.Join(t.TempDir(), "driver.test")
	chmod(t, filepath.Dir(exe), 0o755)
	copyFile(t, os.Args[0], exe)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), unprivilegedEnv+"="+root)
	cmd.Dir = filepath.Dir(exe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probing as uid %d: %v\n%s", nobody, err, stderr.String())
	}
	var out outcome
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("the child's outcome: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if out.EUID != nobody {
		t.Fatalf("the child ran as uid %d, want %d", out.EUID, nobody)
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
