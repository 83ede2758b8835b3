package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A layout is a fake node root: host path -> "" for an empty file, "-> target" for a symlink,
// "dir" for a directory. Libraries are empty files: detect never reads them, NVML is a mock.
type layout map[string]string

// write builds the layout under a fresh temp dir and returns it.
func (l layout) write(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for p, what := range l {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case what == "dir":
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(what, "-> "):
			err = os.Symlink(strings.TrimPrefix(what, "-> "), full)
		default:
			err = os.WriteFile(full, []byte(what), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// with adds entries to a copy of l.
func (l layout) with(more layout) layout {
	out := layout{}
	for k, v := range l {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// driverFiles is a driver installed the way its .run installer and ldconfig leave it in dir:
// each real file under its full version, with the SONAME link beside it.
func driverFiles(dir string, libs ...string) layout {
	l := layout{}
	for _, lib := range libs {
		name, soname, _ := strings.Cut(lib, "=")
		real := dir + "/" + name + ".so.550.54.15"
		l[real] = ""
		if soname != "" {
			l[dir+"/"+name+".so."+soname] = "-> " + name + ".so.550.54.15"
			l[dir+"/"+name+".so"] = "-> " + name + ".so." + soname // the linker's link: never published
		}
	}
	return l
}

func binaries(dir string, names ...string) layout {
	l := layout{}
	for _, n := range names {
		l[dir+"/"+n] = ""
	}
	return l
}

const lib = "/usr/lib/x86_64-linux-gnu"

var computeLibs = []string{"libnvidia-ml=1", "libcuda=1", "libcudadebugger=1", "libnvidia-ptxjitcompiler=1", "libnvidia-gpucomp"}

// Debian/Ubuntu with merged /usr: libraries beside the C library, tools in /usr/bin, and an
// ld.so.cache that names them through /lib (a link to usr/lib).
var debianLayout = driverFiles(lib, computeLibs...).
	with(binaries("/usr/bin", "nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "sh", "python3")).
	with(layout{
		"/lib":                                 "-> usr/lib",
		lib + "/libc.so.6":                     "",
		"/usr/lib/i386-linux-gnu/libcuda.so.1": "",
	})

func debianCache() []byte {
	return ldCacheFile{entries: []LDCacheEntry{
		{Name: "libnvidia-ml.so.1", Path: "/lib/x86_64-linux-gnu/libnvidia-ml.so.1", Flags: x8664},
		{Name: "libcuda.so.1", Path: "/lib/i386-linux-gnu/libcuda.so.1", Flags: LDFlagELFLibc6},
		{Name: "libcuda.so.1", Path: "/lib/x86_64-linux-gnu/libcuda.so.1", Flags: x8664},
		{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: x8664},
	}}.newFormat()
}

// RHEL and friends: /usr/lib64, no cache entry for the driver (ldconfig not rerun).
var rhelLayout = driverFiles("/usr/lib64", computeLibs...).
	with(binaries("/usr/bin", "nvidia-smi", "sh")).
	with(layout{"/usr/lib64/libc.so.6": "", "/lib64": "-> usr/lib64"})

// GKE: the installer puts the driver in its own tree; the node's system libraries are elsewhere.
var gkeLayout = driverFiles("/home/kubernetes/bin/nvidia/lib64", append(computeLibs, "libGLX_nvidia=0")...).
	with(binaries("/home/kubernetes/bin/nvidia/bin", "nvidia-smi", "nvidia-debugdump", "nvidia-persistenced")).
	with(layout{lib + "/libc.so.6": "", "/usr/bin/sh": ""})

// Versioned directories (old Ubuntu nvidia-NNN packages): the newest one wins.
var versionedLayout = driverFiles("/usr/lib/nvidia-550", computeLibs...).
	with(binaries("/usr/lib/nvidia-550/bin", "nvidia-smi")).
	with(layout{
		"/usr/lib/nvidia-470/libnvidia-ml.so.1": "",
		"/usr/lib/nvidia-470/bin/nvidia-smi":    "",
		lib + "/libc.so.6":                      "",
	})

// NVIDIA's GPU Operator (and clusters/kind-gpu.yaml): the driver's root under /run/nvidia/driver.
var gpuOperatorLayout = driverFiles("/run/nvidia/driver"+lib, computeLibs...).
	with(binaries("/run/nvidia/driver/usr/bin", "nvidia-smi", "sh")).
	with(layout{"/run/nvidia/driver" + lib + "/libc.so.6": "", lib + "/libc.so.6": ""})

// Debian's own nvidia-driver packages: the files live in nvidia/current and the SONAME links
// go there through /etc/alternatives, absolute links all the way.
var debianPackagesLayout = driverFiles(lib+"/nvidia/current", computeLibs...).
	with(binaries("/usr/bin", "nvidia-smi", "sh")).
	with(layout{
		lib + "/libc.so.6":         "",
		lib + "/libnvidia-ml.so.1": "-> /etc/alternatives/nvidia--libnvidia-ml.so.1-x86_64-linux-gnu",
		"/etc/alternatives/nvidia--libnvidia-ml.so.1-x86_64-linux-gnu": "-> " + lib + "/nvidia/current/libnvidia-ml.so.1",
		lib + "/libcuda.so.1":                             "-> /etc/alternatives/libcuda.so.1-x86_64-linux-gnu",
		"/etc/alternatives/libcuda.so.1-x86_64-linux-gnu": "-> " + lib + "/nvidia/current/libcuda.so.1",
	})

// Inside a GPU container, as the operator leaves it: each driver file mounted on its own into
// the image's own library directories and /usr/bin, beside the image's C library.
// `nodeprobe detect` in such a container tells what it got.
var gpuContainerLayout = layout{
	lib + "/libnvidia-ml.so.1":        "",
	lib + "/libcuda.so.1":             "",
	"/usr/lib64/libnvidia-ml.so.1":    "",
	"/usr/lib64/libcuda.so.1":         "",
	"/usr/bin/nvidia-smi":             "",
	"/lib/x86_64-linux-gnu/libc.so.6": "",
	"/lib64/ld-linux-x86-64.so.2":     "",
	"/opt/venv/bin/python3":           "",
	"/opt/venv/lib/libvenv.so":        "",
}

// Inside a GPU container as GKE's device plugin, and mlkube before, left it: under
// /usr/local/nvidia.
var gpuContainerBeforeLayout = layout{
	"/usr/local/nvidia/lib64/libnvidia-ml.so.1": "",
	"/usr/local/nvidia/lib64/libcuda.so.1":      "",
	"/usr/local/nvidia/bin/nvidia-smi":          "",
	"/lib/x86_64-linux-gnu/libc.so.6":           "",
	"/lib64/ld-linux-x86-64.so.2":               "",
}

// kind's own node: containerd with runc as its default runtime, which gives no driver.
var kindContainerd = layout{"/etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
# default_runtime_name = "nvidia" (a comment is not a setting)
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`}

// NVIDIA's GPU Operator with its container toolkit: the driver under /run/nvidia/driver, and the
// toolkit's runtime made containerd's default (config version 2).
var gpuOperatorToolkitLayout = gpuOperatorLayout.with(layout{"/etc/containerd/config.toml": `version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
          BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
`})

// The toolkit installed by hand on Debian (nvidia-ctk runtime configure --set-as-default):
// containerd 2's config version 3, the toolkit's settings in a drop-in.
var toolkitDropInLayout = debianLayout.with(layout{
	"/etc/containerd/config.toml": "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n",
	"/etc/containerd/conf.d/99-nvidia.toml": `version = 3
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "nvidia"
`,
})

// CDI: specs generated by the toolkit (nvidia-ctk cdi generate) where the device plugin finds
// them, on RHEL; /var/run is a link to /run, absolute, as on most distributions.
var cdiLayout = rhelLayout.with(layout{
	"/var/run":             "-> /run",
	"/run/cdi/nvidia.yaml": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n",
	"/etc/cdi/other.yaml":  "cdiVersion: 0.5.0\nkind: vendor.example/fpga\n",
})

// CRI-O on RHEL with the toolkit's runtime as its default.
var crioLayout = rhelLayout.with(layout{
	"/etc/crio/crio.conf":                  "[crio.runtime]\ndefault_runtime = \"crun\"\n",
	"/etc/crio/crio.conf.d/99-nvidia.conf": "[crio.runtime]\ndefault_runtime = \"nvidia\"\n",
})
