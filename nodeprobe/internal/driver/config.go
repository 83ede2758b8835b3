package driver

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/mlkube/mlkube/operator/accelerator"
)

// Where the driver goes inside containers: the paths NVIDIA's CUDA images already put on their
// library path (LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64) and PATH, so
// images built for Kubernetes GPU nodes find the driver there without changes.
const (
	LibraryMountPath = "/usr/local/nvidia/lib64"
	BinaryMountPath  = "/usr/local/nvidia/bin"
)

// Resources are the extended resources whose containers get the driver.
const (
	Resource       = "nvidia.com/gpu"
	LegacyResource = "alpha.kubernetes.io/nvidia-gpu" // Kubernetes before 1.10, pre-device-plugin
)

// defaultPath is what PATH holds in Debian-based images. The config's PATH replaces the
// image's own (a pod's env wins over the image's ENV), so it must carry the usual directories
// or the container would lose /bin.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// systemDirs hold far more than the driver. Mounting one whole into a container is wrong even
// at a separate path: with it on LD_LIBRARY_PATH the container's programs would load the node's
// C library and every other system library ahead of the image's own, and with /usr/bin on PATH
// the node's python would shadow the image's. From these, only the driver's own files are
// mounted, one hostPath each (a hostPath may name a file), into the separate container paths.
// The names are those inside a driver tree: /run/nvidia/driver/usr/lib/x86_64-linux-gnu is a
// system directory too.
var systemDirs = []string{
	"/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32",
	"/lib/" + multiarch(), "/usr/lib/" + multiarch(), "/usr/local/lib", "/usr/local/lib64",
	"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin",
}

// sharedDir says whether dir (inside t) holds more than the driver: it is a system directory,
// or, wherever it is, it holds a C library or a shell (a distribution that installs its
// libraries somewhere unusual).
func sharedDir(t *tree, dir string) bool {
	if slices.Contains(systemDirs, dir) {
		return true
	}
	names, err := t.root.ReadDir(dir)
	if err != nil {
		return true // what it holds is unknown, so it may hold the C library
	}
	for _, n := range names {
		if n == "libc.so.6" || n == "sh" || strings.HasPrefix(n, "ld-linux") {
			return true
		}
	}
	return false
}

// buildConfig is the accelerator config for the files found: a directory that holds only the
// driver (GKE's lib64, /usr/lib/nvidia-550) is mounted whole, so that files not in our lists
// come along; files in a shared directory are mounted one by one. Files spread over several
// directories are mounted one by one too: two directories cannot both be mounted at one path,
// and a file mounted inside a read-only directory mount cannot get its mount point.
func buildConfig(t *tree, libs, bins []found, resources []string) accelerator.Config {
	var acc accelerator.Accelerator
	acc.Volumes = append(acc.Volumes, volumes(t, libs, "nvidia-libraries", "nvidia-lib-", LibraryMountPath)...)
	acc.Volumes = append(acc.Volumes, volumes(t, bins, "nvidia-binaries", "nvidia-bin-", BinaryMountPath)...)
	if len(libs) > 0 {
		acc.EnvVars = append(acc.EnvVars, accelerator.EnvVar{Name: "LD_LIBRARY_PATH", Value: LibraryMountPath})
	}
	if len(bins) > 0 {
		acc.EnvVars = append(acc.EnvVars, accelerator.EnvVar{Name: "PATH", Value: BinaryMountPath + ":" + defaultPath})
	}
	cfg := accelerator.Config{Accelerators: map[string]accelerator.Accelerator{}}
	if len(acc.Volumes) == 0 {
		return cfg
	}
	for _, r := range resources {
		cfg.Accelerators[r] = acc
	}
	return cfg
}

func volumes(t *tree, files []found, dirName, filePrefix, mountPath string) []accelerator.Volume {
	if len(files) == 0 {
		return nil
	}
	// A directory is mounted whole only when the files' links stay inside it: inside the
	// container, a link to /etc/alternatives/... would lead nowhere.
	dirs := map[string]bool{}
	for _, f := range files {
		dirs[f.dir] = true
		if path.Dir(f.real) != f.dir {
			dirs[path.Dir(f.real)] = true
		}
	}
	if dir := files[0].dir; len(dirs) == 1 && !sharedDir(t, dir) {
		return []accelerator.Volume{{Name: dirName, HostPath: t.host(dir), MountPath: mountPath}}
	}
	var out []accelerator.Volume
	used := map[string]bool{}
	for _, f := range files {
		name := volumeName(filePrefix, f.name)
		for i := 2; used[name]; i++ {
			name = volumeName(filePrefix, fmt.Sprintf("%s-%d", f.name, i))
		}
		used[name] = true
		out = append(out, accelerator.Volume{Name: name, HostPath: t.file(f).Path, MountPath: path.Join(mountPath, f.name)})
	}
	return out
}

// volumeName makes a DNS-1123 label of prefix+file: lower case, other characters as '-', at
// most 63 characters.
func volumeName(prefix, file string) string {
	b := []byte(strings.ToLower(prefix + file))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[len(b)-63:] // keep the end: it tells versions apart
	}
	return strings.Trim(string(b), "-")
}
