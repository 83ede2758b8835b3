package replicajob_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// gpuConfigV1 mounts one file in two places, and names env vars: an older nodeprobe's
// LD_LIBRARY_PATH, which the pod must not get (it would replace the image's own), and another.
const gpuConfigV1 = `accelerators:
  nvidia.com/gpu:
    volumes:
    - name: nvidia-lib-libcuda-so-1
      hostPath: /usr/lib/nvidia-550/libcuda.so.1
      mountPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1
    - name: nvidia-lib-libcuda-so-1
      hostPath: /usr/lib/nvidia-550/libcuda.so.1
      mountPath: /usr/lib64/libcuda.so.1
    envVars:
    - name: LD_LIBRARY_PATH
      value: /usr/local/nvidia/lib64
    - name: NVIDIA_DRIVER_CAPABILITIES
      value: compute,utility
`

const gpuConfigV2 = `accelerators:
  nvidia.com/gpu:
    volumes:
    - name: nvidia-libraries
      hostPath: /home/kubernetes/bin/nvidia/lib64
      mountPath: /usr/local/nvidia/lib64
    - name: nvidia-binaries
      hostPath: /home/kubernetes/bin/nvidia/bin
      mountPath: /usr/local/nvidia/bin
`

// configMapDir lays out a directory the way the kubelet mounts a ConfigMap: the file is a
// symlink through ..data, and an update swaps ..data atomically.
type configMapDir struct {
	t   *testing.T
	dir string
	n   int
}

func (c *configMapDir) write(content string) {
	c.t.Helper()
	c.n++
	version := filepath.Join(c.dir, "..v"+itoa(c.n))
	must(c.t, os.Mkdir(version, 0o755))
	must(c.t, os.WriteFile(filepath.Join(version, "accelerators.yaml"), []byte(content), 0o644))
	tmp := filepath.Join(c.dir, "..data_tmp")
	must(c.t, os.Symlink(filepath.Base(version), tmp))
	must(c.t, os.Rename(tmp, filepath.Join(c.dir, "..data")))
	if c.n == 1 {
		must(c.t, os.Symlink("..data/accelerators.yaml", filepath.Join(c.dir, "accelerators.yaml")))
	}
}

func gpuJob(ns, name string) *v1beta1.TfJob {
	w := replicaGroup(v1beta1.TfReplicaWorker, 1)
	w.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	w.Template.Spec.Containers = append(w.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	return newJob(ns, name, w, replicaGroup(v1beta1.TfReplicaPS, 1))
}

func TestAcceleratorConfigInjectedAndReloaded(t *testing.T) {
	ns := namespace(t)
	cm := &configMapDir{t: t, dir: t.TempDir()}
	cm.write(gpuConfigV1)
	startOperator(t, ns, func(o *operator.Options) { o.AcceleratorConfig = filepath.Join(cm.dir, "accelerators.yaml") })

	must(t, k8s.Create(context.Background(), gpuJob(ns, "gpu1")))
	pods := waitPods(t, ns, "gpu1-worker-0", "gpu1-ps-0")
	w := pods["gpu1-worker-0"]
	if len(w.Spec.Volumes) != 1 || w.Spec.Volumes[0].HostPath == nil || w.Spec.Volumes[0].HostPath.Path != "/usr/lib/nvidia-550/libcuda.so.1" {
		t.Fatalf("worker volumes %+v", w.Spec.Volumes)
	}
	tf := w.Spec.Containers[0]
	if m := tf.VolumeMounts; len(m) != 2 || m[0].MountPath != "/usr/lib/x86_64-linux-gnu/libcuda.so.1" || m[1].MountPath != "/usr/lib64/libcuda.so.1" || !m[0].ReadOnly || !m[1].ReadOnly {
		t.Errorf("tensorflow mounts %+v", tf.VolumeMounts)
	}
	if !hasEnv(tf, "NVIDIA_DRIVER_CAPABILITIES", "compute,utility") || !hasEnv(tf, "TF_CONFIG", "") || hasEnv(tf, "LD_LIBRARY_PATH", "") {
		t.Errorf("tensorflow env %+v: want the config's NVIDIA_DRIVER_CAPABILITIES, never its LD_LIBRARY_PATH", tf.Env)
	}
	if side := w.Spec.Containers[1]; len(side.VolumeMounts) != 0 || len(side.Env) != 0 {
		t.Errorf("the sidecar asks for no GPU but got %+v %+v", side.VolumeMounts, side.Env)
	}
	if ps := pods["gpu1-ps-0"]; len(ps.Spec.Volumes) != 0 {
		t.Errorf("the PS asks for no GPU but got volumes %+v", ps.Spec.Volumes)
	}

	// A ConfigMap update, then a broken file: the first is picked up, the second ignored.
	cm.write(gpuConfigV2)
	eventually(t, "new config in new pods", func() error {
		name := "gpu2-" + itoa(int(time.Now().UnixNano()%1e6))
		must(t, k8s.Create(context.Background(), gpuJob(ns, name)))
		var pod corev1.Pod
		eventually(t, "pod", func() error {
			var ok bool
			pod, ok = listPods(t, ns)[name+"-worker-0"]
			if !ok {
				return errorf("no pod")
			}
			return nil
		})
		if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].HostPath.Path != "/home/kubernetes/bin/nvidia/lib64" {
			return errorf("volumes %+v", pod.Spec.Volumes)
		}
		return nil
	})

	cm.write("accelerators: [this is not a map")
	time.Sleep(300 * time.Millisecond)
	must(t, k8s.Create(context.Background(), gpuJob(ns, "gpu3")))
	var pod corev1.Pod
	eventually(t, "pod", func() error {
		var ok bool
		if pod, ok = listPods(t, ns)["gpu3-worker-0"]; !ok {
			return errorf("no pod")
		}
		return nil
	})
	if len(pod.Spec.Volumes) != 2 {
		t.Errorf("a bad config replaced the good one: volumes %+v", pod.Spec.Volumes)
	}
}

func hasEnv(c corev1.Container, name, value string) bool {
	for _, e := range c.Env {
		if e.Name == name && (value == "" || e.Value == value) {
			return true
		}
	}
	return false
}
