package driver

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Options say where to look and what to publish.
type Options struct {
	// Root is where the node's root file system is ("/" on the node, "/host" in the DaemonSet).
	Root string
	// Legacy also publishes the config under alpha.kubernetes.io/nvidia-gpu.
	Legacy bool
	// Open loads NVML from a file; OpenNVML unless a test gives a mock.
	Open func(libPath string) NVML
}

// NoDriverError says the node has no usable NVIDIA driver: no libnvidia-ml under the root, or
// one that would not load.
type NoDriverError struct {
	Root   string
	Looked []string
	// Unloadable is the libnvidia-ml that was found but would not load (wrong architecture, a
	// broken file, or a C library missing where nodeprobe runs).
	Unloadable string
	// Warnings are problems met on the way, such as an unreadable ld.so.cache.
	Warnings []string
}

func (e *NoDriverError) Error() string {
	msg := "no NVIDIA driver found on this node; looked in: " + strings.Join(e.Looked, ", ")
	if e.Root != "/" {
		msg += " (under " + e.Root + ")"
	}
	if e.Unloadable != "" {
		msg += "; " + e.Unloadable + " is there but could not be loaded"
	}
	for _, w := range e.Warnings {
		msg += "; " + w
	}
	return msg
}

// NVMLError says the driver's files are there but NVML did not answer; the Finding that comes
// with it has the paths and the config, not the GPUs.
type NVMLError struct{ Reason string }

func (e *NVMLError) Error() string {
	return "NVIDIA driver files found, but NVML did not answer: " + e.Reason
}

// Detect finds the node's driver. It returns a *NoDriverError when there is none, and a
// Finding together with an *NVMLError when the files are there but NVML failed.
//
// NVML is loaded from the libnvidia-ml.so found under the root, never from the library path of
// nodeprobe's own image: what runs must be the node's driver, and the paths reported must be
// the node's.
func Detect(opts Options) (*Finding, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	// dlopen takes a relative path relative to the working directory, and messages should say
	// where exactly nodeprobe looked.
	abs, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = abs
	if opts.Open == nil {
		opts.Open = OpenNVML
	}
	node := Root(opts.Root)
	var looked, warnings []string
	for _, prefix := range driverPrefixes {
		t := newTree(node, prefix)
		if lib, ok := t.nvml(); ok {
			return detectIn(t, lib, opts)
		}
		looked = append(looked, t.looked()...)
		warnings = append(warnings, t.warnings()...)
	}
	return nil, &NoDriverError{Root: opts.Root, Looked: looked, Warnings: warnings}
}

func detectIn(t *tree, lib found, opts Options) (*Finding, error) {
	f := &Finding{DriverRoot: opts.Root, NVMLLibrary: t.file(lib).Path, GPUs: []GPU{}, Libraries: []File{}, Binaries: []File{}}
	// Load the real file, resolved inside the tree: the link's own target could point outside.
	f.Loaded = Root(opts.Root).Join(t.host(lib.real))
	nv := opts.Open(f.Loaded)
	var nvmlErr *NVMLError
	switch ret := nv.Init(); ret {
	case nvml.SUCCESS:
		if err := queryNVML(nv, f); err != nil {
			nvmlErr = &NVMLError{Reason: err.Error()}
		}
		nv.Shutdown()
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, &NoDriverError{Root: opts.Root, Looked: []string{t.host(lib.dir)}, Unloadable: t.file(lib).Path, Warnings: t.warnings()}
	default:
		// Not a single NVML call more: see initError.
		nvmlErr = &NVMLError{Reason: initError(ret)}
	}
	if f.DriverVersion == "" {
		f.DriverVersion = versionFromLibrary(lib.real, "libnvidia-ml")
	}

	libs := []found{lib}
	near := dedupe([]string{lib.dir, path.Dir(lib.real)})
	for _, base := range driverLibraries[1:] { // [0] is libnvidia-ml, found already
		if l, ok := t.library(base, near, f.DriverVersion); ok {
			libs = append(libs, l)
		}
	}
	var bins []found
	dirs := binaryDirs(t.root, lib.dir)
	for _, name := range driverBinaries {
		if b, ok := t.binary(name, dirs); ok {
			bins = append(bins, b)
		}
	}
	for _, l := range libs {
		f.Libraries = append(f.Libraries, t.file(l))
	}
	for _, b := range bins {
		f.Binaries = append(f.Binaries, t.file(b))
	}
	resources := []string{Resource}
	if opts.Legacy {
		resources = append(resources, LegacyResource)
	}
	f.Runtime = runtimeDriver(Root(opts.Root), t)
	f.Config = buildConfig(f.Libraries, f.Binaries, resources, f.Runtime)
	// Only now: the search for the other files notes problems too.
	f.Warnings = t.warnings()
	if nvmlErr != nil {
		f.NVMLError = nvmlErr.Reason
		return f, nvmlErr
	}
	return f, nil
}

// Summary is one line about a finding, for logs.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("NVIDIA driver %s", orUnknown(f.DriverVersion))
	if f.CUDADriverVersion != "" {
		s += " (CUDA " + f.CUDADriverVersion + ")"
	}
	if f.NVMLError != "" {
		return s + ", GPUs unknown: " + f.NVMLError
	}
	return s + fmt.Sprintf(", %d GPU(s)", len(f.GPUs))
}

func orUnknown(s string) string {
	if s == "" {
		return "(version unknown)"
	}
	return s
}
