// A stand-in for the driver's nvidia-smi, built by the e2e tests with gcc: a program linked to
// the C library as the real one is (a shell script would need a shell in every image).
#include <stdio.h>

int main(void) {
	printf("fake nvidia-smi: NVIDIA driver 550.54.15, CUDA 12.4\n");
	return 0;
}
