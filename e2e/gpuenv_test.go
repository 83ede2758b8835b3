//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A GPU container keeps its image's own env. Two images, each holding gpucheck
// (testdata/gpuimage), the C library and nothing else, ask for the fake GPU:
//   - one whose ENV puts /opt/venv/bin first on PATH and /opt/venv/lib on LD_LIBRARY_PATH, as a
//     virtual environment or conda does, with gpucheck and its library only there;
//   - one with no ENV at all, gpucheck in /usr/local/bin and its library in a system directory.
//
// Each is started by name. gpucheck must find its library, load the fake driver's libcuda and
// libnvidia-ml through the dynamic loader from where the operator mounted them, and run the
// mounted nvidia-smi by name. Had the operator set PATH or LD_LIBRARY_PATH, the first image
// would not even start.
func imagesOwnEnv(t *testing.T, ctx context.Context, c client.Client, cs kubernetes.Interface, node string) {
	dir := t.TempDir()
	gcc(t, "-shared", "-fPIC", "-o", filepath.Join(dir, "libvenv.so"), "testdata/gpuimage/venv.c")
	gcc(t, "-o", filepath.Join(dir, "gpucheck"), "testdata/gpuimage/gpucheck.c", "-L"+dir, "-lvenv")
	const imagePath = "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, tc := range []struct {
		image        string
		env          []string
		program, lib string
		wantEnv      []string
	}{
		{
			image:   "example.com/venv-gpu:e2e",
			env:     []string{"PATH=" + imagePath, "LD_LIBRARY_PATH=/opt/venv/lib"},
			program: "/opt/venv/bin/gpucheck", lib: "/opt/venv/lib/libvenv.so",
			wantEnv: []string{"PATH=" + imagePath, "LD_LIBRARY_PATH=/opt/venv/lib"},
		},
		{
			image:   "example.com/no-env-gpu:e2e",
			program: "/usr/local/bin/gpucheck", lib: "/usr/lib/x86_64-linux-gnu/libvenv.so",
			wantEnv: []string{"LD_LIBRARY_PATH=(unset)"},
		},
	} {
		t.Run(tc.image, func(t *testing.T) {
			importImage(t, tc.image, tc.env, map[string]string{
				tc.program: filepath.Join(dir, "gpucheck"),
				tc.lib:     filepath.Join(dir, "libvenv.so"),
			})
			out, _, err := run(t, "load", "--name", name, tc.image)
			if err != nil {
				t.Fatalf("devctl load %s: %v\n%s", tc.image, err, out)
			}
			short := strings.TrimSuffix(strings.TrimPrefix(tc.image, "example.com/"), ":e2e")
			_, log := runGPUJob(t, ctx, c, cs, node, newNamespace(t, c, short), corev1.Container{
				Name: "tensorflow", Image: tc.image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"gpucheck"}, // by name: the image's PATH finds it
			})
			want := []string{
				"program: " + tc.program,
				"own library: " + tc.lib + ": hello from the image's own library",
				"libcuda.so.1: loaded from /usr/lib/x86_64-linux-gnu/libcuda.so.1",
				"libcuda.so.1: cuDriverGetVersion 12040",
				"libnvidia-ml.so.1: loaded from /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
				"libnvidia-ml.so.1: driver " + fakeDriverVersion,
				"fake nvidia-smi: NVIDIA driver " + fakeDriverVersion + ", CUDA 12.4",
				"nvidia-smi: exit 0",
			}
			var patterns []string
			for _, line := range append(want, tc.wantEnv...) {
				patterns = append(patterns, `(?m)^`+regexp.QuoteMeta(line)+`$`)
			}
			matches(t, "gpucheck in "+tc.image, log, patterns...)
			if strings.Contains(log, "/usr/local/nvidia") {
				t.Errorf("gpucheck's env names /usr/local/nvidia:\n%s", log)
			}
		})
	}
}

// importImage makes an image with docker import: the C library of this machine (Debian, as the
// node and its fake driver are), the given files (image path: file here) and env.
func importImage(t *testing.T, ref string, env []string, files map[string]string) {
	t.Helper()
	all := map[string]string{
		"/lib64/ld-linux-x86-64.so.2":         "/lib64/ld-linux-x86-64.so.2",
		"/usr/lib/x86_64-linux-gnu/libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
	}
	for in, here := range files {
		all[in] = here
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for in, here := range all {
		data, err := os.ReadFile(here) // through links: the image gets the file itself
		if err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(in); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			must(t, tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir}))
		}
		must(t, tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(in, "/"), Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}))
		_, err = tw.Write(data)
		must(t, err)
	}
	must(t, tw.Close())
	args := []string{"import"}
	for _, e := range env {
		args = append(args, "-c", "ENV "+e)
	}
	cmd := exec.Command("docker", append(args, "-", ref)...)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import %s: %v\n%s", ref, err, out)
	}
}

// runGPUJob runs a TfJob of one worker with the container, asking for one nvidia.com/gpu, on the
// node that advertises it, and returns its pod once it succeeded, and the pod's log. A failed
// job fails the test with the log.
func runGPUJob(t *testing.T, ctx context.Context, c client.Client, cs kubernetes.Interface, node, ns string, ctr corev1.Container) (corev1.Pod, string) {
	t.Helper()
	ctr.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuResource: resource.MustParse("1")}}
	job := &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{{
			TfReplicaType: v1beta1.TfReplicaWorker,
			Template:      corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr}}},
		}}},
	}
	must(t, c.Create(ctx, job))
	podKey := types.NamespacedName{Namespace: ns, Name: "gpu-worker-0"}
	eventually(t, 3*time.Minute, "the GPU job to succeed", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(job), job))
		var pod corev1.Pod
		if err := c.Get(ctx, podKey, &pod); err == nil {
			for _, cond := range pod.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, string(gpuResource)) {
					// The kubelet should keep an extended resource it did not set; if it did
					// not, say so and put it back.
					t.Logf("pod %s unschedulable (%s); advertising %s on %s again", podKey, cond.Message, gpuResource, node)
					advertiseGPU(t, ctx, c, node)
				}
			}
		}
		switch job.Status.State {
		case v1beta1.JobStateSucceeded:
			return nil
		case v1beta1.JobStateFailed:
			var pod corev1.Pod
			_ = c.Get(ctx, podKey, &pod)
			t.Fatalf("the GPU job failed: %+v\nits pod's statuses: %+v\nits log:\n%s", job.Status.Conditions, pod.Status.ContainerStatuses, podLog(t, cs, pod, nil))
		}
		return fmt.Errorf("state %q conditions %+v", job.Status.State, job.Status.Conditions)
	})
	var pod corev1.Pod
	eventually(t, time.Minute, "the GPU pod kept, Succeeded", func() error {
		if err := c.Get(ctx, podKey, &pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	return pod, podLog(t, cs, pod, nil)
}
