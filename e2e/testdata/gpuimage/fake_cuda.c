// A stand-in for the driver's libcuda.so.1, built by the e2e tests with gcc: a real shared
// library with the two entry points a CUDA program calls first, so that a test image can load it
// through the dynamic loader and call it, as a CUDA program does, on a node without a GPU.
typedef int CUresult;

CUresult cuInit(unsigned int flags) {
	return flags == 0 ? 0 : 1; // CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE
}

CUresult cuDriverGetVersion(int *version) {
	if (!version)
		return 1;
	*version = 12040; // CUDA 12.4, as the fake libnvidia-ml says
	return 0;
}
