package driver

import (
	"fmt"
	"path"
	"strings"

	"github.com/mlkube/mlkube/operator/accelerator"
)

// Where the driver goes inside containers: each file into the directories that the image's own
// dynamic loader and shell already search, as the NVIDIA container toolkit does, so that no env
// is needed. A pod's env wins over the image's ENV, so any PATH or LD_LIBRARY_PATH we set would
// replace the image's own (its virtual environment's bin, its conda, its CUDA libraries) and the
// image would lose its Python the moment it asked for a GPU.
//
// Libraries go to both library directories of the two families, and each family's loader
// searches its own without any ld.so.cache entry (ld.so --help lists them): Debian and Ubuntu's
// /usr/lib/<multiarch>, RHEL and friends' /usr/lib64. The other directory is created empty
// where the image lacks it, and nothing there looks in it. Tools go to /usr/bin, on every PATH.
var (
	LibraryMountDirs = []string{"/usr/lib/" + multiarch(), "/usr/lib64"}
	BinaryMountDir   = "/usr/bin"
)

// Resources are the extended resources whose containers get the driver.
const (
	Resource       = "nvidia.com/gpu"
	LegacyResource = "alpha.kubernetes.io/nvidia-gpu" // Kubernetes before 1.10, pre-device-plugin
)

// buildConfig is the accelerator config for the files found: each file is its own hostPath
// volume (a hostPath may name a file), mounted under its name into the container's own
// directories. A directory is never mounted whole, even one that holds only the driver: it
// would hide the image's own directory of the same name. On a node whose runtime gives
// containers the driver itself (rt), the config mounts nothing and says so.
func buildConfig(libs, bins []File, resources []string, rt *Runtime) accelerator.Config {
	cfg := accelerator.Config{Accelerators: map[string]accelerator.Accelerator{}}
	var acc accelerator.Accelerator
	if rt != nil {
		acc.Runtime = accelerator.RuntimeNVIDIA
	} else {
		acc.Volumes = append(volumes(libs, "nvidia-lib-", LibraryMountDirs), volumes(bins, "nvidia-bin-", []string{BinaryMountDir})...)
		if len(acc.Volumes) == 0 {
			return cfg
		}
	}
	for _, r := range resources {
		cfg.Accelerators[r] = acc
	}
	return cfg
}

// volumes mounts each file into each of dirs: one volume per file (the pod gets one hostPath
// volume of that name), one entry per place it is mounted.
func volumes(files []File, prefix string, dirs []string) []accelerator.Volume {
	var out []accelerator.Volume
	used := map[string]bool{}
	for _, f := range files {
		name := volumeName(prefix, f.Name)
		for i := 2; used[name]; i++ {
			name = volumeName(prefix, fmt.Sprintf("%s-%d", f.Name, i))
		}
		used[name] = true
		for _, dir := range dirs {
			out = append(out, accelerator.Volume{Name: name, HostPath: f.Path, MountPath: path.Join(dir, f.Name)})
		}
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
