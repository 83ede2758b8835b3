// Package driver finds a node's NVIDIA driver: what NVML says about it (driver and CUDA
// versions, the GPUs) and where its libraries and tools are on the host's file system, and
// turns that into the accelerator config the operator mounts into GPU containers.
package driver

import (
	"github.com/mlkube/mlkube/operator/accelerator"
)

// Finding is what a node has. It is nodeprobe's output (`detect -o json|yaml`) and what
// `publish` records on the node.
type Finding struct {
	// DriverRoot is where the node's root file system was read from ("/", or "/host" in the
	// DaemonSet). Every path below is a host path, without this prefix.
	DriverRoot string `json:"driverRoot"`
	// DriverVersion is NVML's, e.g. "550.54.15". When NVML could not start it is read from the
	// name of the libnvidia-ml file, and NVMLError says why.
	DriverVersion string `json:"driverVersion,omitempty"`
	// CUDADriverVersion is the newest CUDA version the driver supports, e.g. "12.4".
	CUDADriverVersion string `json:"cudaDriverVersion,omitempty"`
	// NVMLError is set when the driver's files are there but NVML would not start (no access
	// to the GPU devices, kernel module not loaded, version mismatch). The paths, and so the
	// config, are still right; the GPU list is empty.
	NVMLError string `json:"nvmlError,omitempty"`
	// NVMLLibrary is the libnvidia-ml.so.1 that was loaded.
	NVMLLibrary string `json:"nvmlLibrary"`
	GPUs        []GPU  `json:"gpus"`
	Libraries   []File `json:"libraries"`
	Binaries    []File `json:"binaries"`
	// Warnings are problems met on the way that did not stop the search: an unreadable or
	// garbled ld.so.cache, a directory that could not be listed, driver files skipped because
	// they are dangling links, symlink loops or unreadable. Each names the host path.
	Warnings []string `json:"warnings,omitempty"`
	// Runtime is set when the node's container runtime gives containers the driver itself
	// (the NVIDIA container toolkit); Config then mounts nothing.
	Runtime *Runtime `json:"runtime,omitempty"`
	// Config is the accelerator config for this node, in the operator's format.
	Config accelerator.Config `json:"config"`
	// Loaded is the file nodeprobe loaded NVML from, as nodeprobe sees it (under DriverRoot,
	// links resolved). A long-running nodeprobe compares it between probes: a driver update
	// changes it, and only a new process can load the new library.
	Loaded string `json:"-"`
}

// Degraded says the probe met problems (Warnings): the driver's files may be only partly
// there, so its config may lack some. Publishing never lets a degraded finding replace a
// config that mounts more (see package publish).
func (f *Finding) Degraded() bool { return len(f.Warnings) > 0 }

// GPU is one device as NVML lists it.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	UUID  string `json:"uuid,omitempty"`
	// MemoryTotal is in bytes.
	MemoryTotal uint64 `json:"memoryTotal,omitempty"`
	// Error is set when NVML failed to answer about this device (e.g. it fell off the bus).
	Error string `json:"error,omitempty"`
}

// File is one driver file.
type File struct {
	// Name is the file name containers use: the SONAME for libraries (libcuda.so.1).
	Name string `json:"name"`
	// Path is the host path, its directory resolved (/usr/lib/x86_64-linux-gnu/libcuda.so.1).
	Path string `json:"path"`
	// FoundBy says which search found it: "nvml-dir" (beside the loaded libnvidia-ml),
	// "ld.so.cache", or "search" (one of the usual directories).
	FoundBy string `json:"foundBy"`
}

// How a file was found.
const (
	FoundNextToNVML = "nvml-dir"
	FoundInLDCache  = "ld.so.cache"
	FoundBySearch   = "search"
)
