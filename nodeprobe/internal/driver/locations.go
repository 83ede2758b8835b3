package driver

import (
	"path"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// driverPrefixes are where a driver's own root file system can be inside the node's: the node's
// root itself (distribution packages, the .run installer, GKE's installer), or /run/nvidia/driver,
// where NVIDIA's GPU Operator mounts the root of its driver container and where
// clusters/kind-gpu.yaml puts the host's driver inside a kind node. Each prefix is searched as a
// root of its own (its symlinks and its ld.so.cache speak of paths inside it), and the first
// prefix with a libnvidia-ml wins: the other files must come from the same driver.
var driverPrefixes = []string{"/", "/run/nvidia/driver"}

// multiarch is Debian's directory name for this program's ABI.
func multiarch() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// libraryDirs are the usual library directories inside a driver root, in the order searched:
// Debian/Ubuntu, RHEL and friends, GKE's installer, then the versioned directories some
// distributions use (Ubuntu's old nvidia-NNN packages, Arch), newest first. Last comes
// containerDir, for `nodeprobe detect` run inside a GPU container.
func libraryDirs(r Root) []string {
	dirs := []string{
		"/usr/lib/" + multiarch(),
		"/usr/lib64",
		"/home/kubernetes/bin/nvidia/lib64",
	}
	dirs = append(dirs, versionedDirs(r)...)
	return append(dirs, "/usr/lib/nvidia", containerDir)
}

// containerDir is where GKE's device plugin, and mlkube before it mounted the driver into the
// image's own directories, put the driver's libraries inside a GPU container (NVIDIA's CUDA
// images have it on their LD_LIBRARY_PATH). Its bin sibling holds the tools.
const containerDir = "/usr/local/nvidia/lib64"

// libraryDirPatterns are libraryDirs as the "looked in" message names them.
func libraryDirPatterns() []string {
	return []string{
		"/usr/lib/" + multiarch(), "/usr/lib64", "/home/kubernetes/bin/nvidia/lib64",
		"/usr/lib/nvidia-NNN", "/usr/lib/nvidia", containerDir,
	}
}

// binaryDirs are where the tools are. nearLibs (the directory libnvidia-ml was in) comes first
// through its own bin sibling: GKE's lib64 has bin beside it, /usr/lib/nvidia-550 has bin inside.
func binaryDirs(r Root, nearLibs string) []string {
	var dirs []string
	switch base := path.Base(nearLibs); {
	case base == "lib64" || base == "lib":
		dirs = append(dirs, path.Join(path.Dir(nearLibs), "bin"))
	case base == "nvidia" || versionedDir.MatchString(base):
		dirs = append(dirs, path.Join(nearLibs, "bin"))
	}
	dirs = append(dirs, "/usr/bin", "/home/kubernetes/bin/nvidia/bin")
	for _, d := range versionedDirs(r) {
		dirs = append(dirs, path.Join(d, "bin"))
	}
	return dedupe(dirs)
}

var versionedDir = regexp.MustCompile(`^nvidia-([0-9]+)$`)

// versionedDirs are the /usr/lib/nvidia-NNN directories, highest NNN first.
func versionedDirs(r Root) []string {
	names, _ := r.ReadDir("/usr/lib")
	type dir struct {
		name string
		n    int
	}
	var found []dir
	for _, name := range names {
		if m := versionedDir.FindStringSubmatch(name); m != nil {
			n, _ := strconv.Atoi(m[1])
			found = append(found, dir{name, n})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].n > found[j].n })
	var out []string
	for _, d := range found {
		out = append(out, "/usr/lib/"+d.name)
	}
	return out
}

// driverLibraries are the driver's user-space libraries a CUDA program may load, by name
// without ".so...": NVIDIA's "utility" and "compute" sets, the ones its container toolkit mounts
// into CUDA containers by default. Graphics and video libraries are left out; on layouts whose
// library directory is mounted whole they come along anyway.
var driverLibraries = []string{
	"libnvidia-ml", // NVML: nvidia-smi, DCGM, frameworks that query the GPUs
	"libnvidia-cfg",
	"libcuda", // the CUDA driver API
	"libcudadebugger",
	"libnvidia-ptxjitcompiler",  // JIT-compiles PTX for GPUs newer than the program's binaries
	"libnvidia-fatbinaryloader", // libcuda needs it in drivers before 440
	"libnvidia-nvvm",
	"libnvidia-gpucomp",
	"libnvidia-opencl",
	"libnvidia-compiler",
	"libnvidia-allocator",
	"libnvidia-pkcs11",
	"libnvidia-pkcs11-openssl3",
}

// driverBinaries are the driver's tools worth having in a GPU container.
var driverBinaries = []string{
	"nvidia-smi",
	"nvidia-debugdump",
	"nvidia-persistenced",
	"nvidia-cuda-mps-control",
	"nvidia-cuda-mps-server",
}

// pickSOName chooses, among a directory's (or the cache's) names, the file to publish for
// library base. Drivers install libcuda.so.550.54.15 and ldconfig adds the SONAME link
// libcuda.so.1, which is what programs load: the name with the fewest version numbers wins.
// Some libraries' SONAME is the full version (libnvidia-gpucomp.so.550.54.15); when a directory
// holds several of those, the driver's own version wins. The bare libcuda.so link is for linkers,
// not for loading, and is skipped.
func pickSOName(base string, names []string, driverVersion string) (string, bool) {
	prefix := base + ".so."
	var cands []string
	for _, n := range names {
		if v, ok := strings.CutPrefix(n, prefix); ok && soVersion.MatchString(v) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if da, db := strings.Count(a, "."), strings.Count(b, "."); da != db {
			return da < db
		}
		if driverVersion != "" && (a == prefix+driverVersion) != (b == prefix+driverVersion) {
			return a == prefix+driverVersion
		}
		return a > b // the highest version of equal length
	})
	return cands[0], true
}

var soVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

// versionFromLibrary reads a driver version from a library's real file name
// (libnvidia-ml.so.550.54.15 -> 550.54.15); the SONAME link's ".1" is no version.
func versionFromLibrary(real, base string) string {
	v, ok := strings.CutPrefix(path.Base(real), base+".so.")
	if !ok || !soVersion.MatchString(v) || !strings.Contains(v, ".") {
		return ""
	}
	return v
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
