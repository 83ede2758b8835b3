// gpucheck is what a GPU program in a user's image does first, reduced to what the operator can
// break: it is started by name (found on the image's own PATH), needs its image's own library
// (found on the image's own LD_LIBRARY_PATH, or in a system directory), loads the driver's
// libcuda.so.1 and libnvidia-ml.so.1 by name through the dynamic loader and calls each, and runs
// nvidia-smi by name. It prints where each came from, one line each, and exits 1 if any failed.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern const char *venv_hello(void);

static int failed;

// loaded prints the file the loader took for a handle.
static void loaded(const char *name, void *h) {
	struct link_map *map = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == NULL) {
		printf("%s: loaded, from an unknown file\n", name);
		return;
	}
	printf("%s: loaded from %s\n", name, map->l_name);
}

static void *open_lib(const char *name) {
	void *h = dlopen(name, RTLD_NOW);
	if (h == NULL) {
		printf("%s: not loaded: %s\n", name, dlerror());
		failed = 1;
		return NULL;
	}
	loaded(name, h);
	return h;
}

int main(void) {
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n < 0 ? 0 : n] = '\0';
	printf("program: %s\n", self);

	Dl_info info;
	if (dladdr((void *)venv_hello, &info) && info.dli_fname)
		printf("own library: %s: %s\n", info.dli_fname, venv_hello());

	void *cuda = open_lib("libcuda.so.1");
	if (cuda) {
		int (*init)(unsigned int) = (int (*)(unsigned int))dlsym(cuda, "cuInit");
		int (*version)(int *) = (int (*)(int *))dlsym(cuda, "cuDriverGetVersion");
		int v = 0;
		if (init && version && init(0) == 0 && version(&v) == 0) {
			printf("libcuda.so.1: cuDriverGetVersion %d\n", v);
		} else {
			printf("libcuda.so.1: cuInit or cuDriverGetVersion failed\n");
			failed = 1;
		}
	}
	void *nvml = open_lib("libnvidia-ml.so.1");
	if (nvml) {
		int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
		int (*version)(char *, unsigned int) = (int (*)(char *, unsigned int))dlsym(nvml, "nvmlSystemGetDriverVersion");
		char v[96] = "";
		if (init && version && init() == 0 && version(v, sizeof v) == 0) {
			printf("libnvidia-ml.so.1: driver %s\n", v);
		} else {
			printf("libnvidia-ml.so.1: nvmlInit_v2 or nvmlSystemGetDriverVersion failed\n");
			failed = 1;
		}
	}

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execlp("nvidia-smi", "nvidia-smi", (char *)NULL);
		printf("nvidia-smi: not run: not found on PATH %s\n", getenv("PATH") ? getenv("PATH") : "(unset)");
		fflush(stdout);
		_exit(127);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		failed = 1;
	printf("nvidia-smi: exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);

	printf("PATH=%s\n", getenv("PATH") ? getenv("PATH") : "(unset)");
	printf("LD_LIBRARY_PATH=%s\n", getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "(unset)");
	return failed;
}
