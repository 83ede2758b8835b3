// A stand-in for the driver's libnvidia-ml.so.1, built by the tests with gcc, so that nodeprobe's
// real path (go-nvml dlopens the file, then calls NVML through symbols resolved at their first
// call) runs on machines without a GPU. It has only the functions nodeprobe calls: any other
// call ends the process with "symbol lookup error", and the test sees it.
//
// Environment:
//   FAKE_NVML_INIT  nvmlInit_v2 returns this NVML error code instead of succeeding
//   FAKE_NVML_GPUS  how many GPUs (default 2, at most 16)
//   FAKE_NVML_LOG   file to which every call's name is appended, one per line
#include <stdio.h>
#include <stdlib.h>

typedef int nvmlReturn_t;
// As in go-nvml's nvml.h: a device is a struct holding the handle, passed by value.
struct nvmlDevice_st { unsigned int index; };
typedef struct { struct nvmlDevice_st *handle; } nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2

static int initialized;
static struct nvmlDevice_st devices[16];

static void called(const char *fn) {
	const char *log = getenv("FAKE_NVML_LOG");
	if (log) {
		FILE *f = fopen(log, "a");
		if (f) { fprintf(f, "%s\n", fn); fclose(f); }
	}
}

// Every function but the error string needs a successful init first: calling NVML after a
// failed nvmlInit is the mistake that kills the process with a real driver too.
static void needs_init(const char *fn) {
	called(fn);
	if (!initialized) {
		fprintf(stderr, "fake NVML: %s called without a successful nvmlInit\n", fn);
		abort();
	}
}

static unsigned int gpus(void) {
	const char *s = getenv("FAKE_NVML_GPUS");
	int n = s ? atoi(s) : 2;
	return n < 0 ? 0 : n > 16 ? 16 : (unsigned int)n;
}

nvmlReturn_t nvmlInit_v2(void) {
	called("nvmlInit_v2");
	const char *r = getenv("FAKE_NVML_INIT");
	if (r && atoi(r) != 0) return atoi(r);
	initialized = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
	needs_init("nvmlShutdown");
	initialized = 0;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
	called("nvmlErrorString");
	return r == NVML_SUCCESS ? "Success" : "Fake NVML error";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
	needs_init("nvmlSystemGetDriverVersion");
	snprintf(version, length, "550.54.15");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
	needs_init("nvmlSystemGetCudaDriverVersion");
	*v = 12040;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
	needs_init("nvmlDeviceGetCount_v2");
	*count = gpus();
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *device) {
	needs_init("nvmlDeviceGetHandleByIndex_v2");
	if (i >= gpus()) return NVML_ERROR_INVALID_ARGUMENT;
	devices[i].index = i;
	device->handle = &devices[i];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
	needs_init("nvmlDeviceGetName");
	snprintf(name, length, "Fake NVIDIA H100 80GB HBM3");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
	needs_init("nvmlDeviceGetUUID");
	snprintf(uuid, length, "GPU-fa4e0000-0000-0000-0000-%012u", device.handle->index);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
	needs_init("nvmlDeviceGetMemoryInfo");
	memory->total = 85520809984ULL; // 81559 MiB, an H100 80GB's
	memory->used = 0;
	memory->free = memory->total;
	return NVML_SUCCESS;
}
