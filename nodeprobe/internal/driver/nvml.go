package driver

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is the part of NVML nodeprobe calls. go-nvml's nvml.Interface has it, and so do its
// mocks (mock.Interface, the fake machines in mock/dgxa100), which is how tests without a GPU
// run the same code.
type NVML interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
}

// OpenNVML loads NVML from the given file. Loading happens in Init: go-nvml dlopens the file
// there and reports a failure as ERROR_LIBRARY_NOT_FOUND.
func OpenNVML(libPath string) NVML {
	return nvml.New(nvml.WithLibraryPath(libPath))
}

// initError names an Init failure without asking NVML. go-nvml calls NVML functions as
// symbols resolved at their first call; when the library did not load they resolve to nothing
// and the process dies ("symbol lookup error"). Only Init's own return value is safe to look
// at, so even its text comes from here rather than from nvmlErrorString.
func initError(r nvml.Return) string {
	names := map[nvml.Return]string{
		nvml.ERROR_UNINITIALIZED:           "NVML not initialized",
		nvml.ERROR_NO_PERMISSION:           "no permission to open the GPU devices (/dev/nvidiactl, /dev/nvidiaN)",
		nvml.ERROR_DRIVER_NOT_LOADED:       "the NVIDIA kernel module is not loaded (or its devices are not visible here)",
		nvml.ERROR_LIBRARY_NOT_FOUND:       "libnvidia-ml could not be loaded",
		nvml.ERROR_FUNCTION_NOT_FOUND:      "libnvidia-ml lacks a function NVML needs",
		nvml.ERROR_LIB_RM_VERSION_MISMATCH: "the driver's kernel module and libraries are different versions (reboot pending after an update?)",
		nvml.ERROR_OPERATING_SYSTEM:        "the operating system or cgroups block the GPU devices",
		nvml.ERROR_GPU_IS_LOST:             "a GPU fell off the bus",
		nvml.ERROR_INSUFFICIENT_RESOURCES:  "out of resources",
		nvml.ERROR_UNKNOWN:                 "unknown error",
	}
	if s, ok := names[r]; ok {
		return fmt.Sprintf("nvmlInit failed: %s (NVML error %d)", s, int32(r))
	}
	return fmt.Sprintf("nvmlInit failed: NVML error %d", int32(r))
}

// queryNVML reads versions and GPUs from an initialized NVML. A failing device is listed with
// its error rather than dropped, so that a node with one broken GPU still says how many it has.
func queryNVML(lib NVML, f *Finding) error {
	v, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlSystemGetDriverVersion: %v", ret)
	}
	f.DriverVersion = v
	cuda, ret := lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlSystemGetCudaDriverVersion: %v", ret)
	}
	f.CUDADriverVersion = cudaVersion(cuda)
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlDeviceGetCount: %v", ret)
	}
	f.GPUs = make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		f.GPUs = append(f.GPUs, queryGPU(lib, i))
	}
	return nil
}

func queryGPU(lib NVML, i int) GPU {
	g := GPU{Index: i}
	dev, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		g.Error = fmt.Sprintf("nvmlDeviceGetHandleByIndex: %v", ret)
		return g
	}
	var errs []string
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		errs = append(errs, fmt.Sprintf("nvmlDeviceGetName: %v", ret))
	}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		errs = append(errs, fmt.Sprintf("nvmlDeviceGetUUID: %v", ret))
	}
	if mem, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		errs = append(errs, fmt.Sprintf("nvmlDeviceGetMemoryInfo: %v", ret))
	} else {
		g.MemoryTotal = mem.Total
	}
	if len(errs) > 0 {
		g.Error = fmt.Sprint(errs)
	}
	return g
}

// cudaVersion turns NVML's 1000*major + 10*minor (12040) into "12.4".
func cudaVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}
