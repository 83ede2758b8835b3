package commands

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
)

func TestNodeprobeHealth(t *testing.T) {
	ctx := context.Background()
	if got := nodeprobeHealth(ctx, fake.NewClientBuilder().Build()); got != "not installed (run `devctl up`)" {
		t.Errorf("no DaemonSet: %q", got)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mlkube-nodeprobe", Name: "nodeprobe", Generation: 2, Annotations: map[string]string{cluster.VersionAnnotation: "v1"}},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "nodeprobe", Image: "mlkube/nodeprobe:abc"}},
		}}},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberReady: 2},
	}
	if got, want := nodeprobeHealth(ctx, fake.NewClientBuilder().WithObjects(ds).Build()), "Ready, 2/2 nodes ready, version v1, image mlkube/nodeprobe:abc"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ds.Status.NumberReady = 1
	if got := nodeprobeHealth(ctx, fake.NewClientBuilder().WithObjects(ds).Build()); !strings.HasPrefix(got, "not ready, 1/2 nodes ready") {
		t.Errorf("one pod not ready: %q", got)
	}
}

func TestDescribeGPUs(t *testing.T) {
	node := func(name, annotation string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if annotation != "" {
			n.Annotations = map[string]string{"mlkube.io/gpu-driver": annotation}
		}
		return n
	}
	const empty = "accelerators: {}\n"
	const gpu = `accelerators:
  nvidia.com/gpu:
    volumes:
    - {name: nvidia-lib-libcuda-so-1, hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, mountPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1}
    - {name: nvidia-lib-libcuda-so-1, hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, mountPath: /usr/lib64/libcuda.so.1}
`
	const toolkit = `accelerators:
  nvidia.com/gpu:
    runtime: nvidia-container-toolkit
    nodeSelector: {mlkube.io/gpu-driver-layout: def}
`
	noGPU := `{"gpu":false,"reason":"no NVIDIA driver found on this node; looked in: ..."}`
	withGPU := `{"gpu":true,"driverVersion":"550.54.15","cudaDriverVersion":"12.4","gpus":2,"layout":"abc"}`
	noNVML := `{"gpu":true,"reason":"nvmlInit failed: ...","driverVersion":"550.54.15","gpus":0}`
	byRuntime := `{"gpu":true,"driverVersion":"580.95.05","gpus":8,"layout":"def","runtime":"nvidia is containerd's default runtime (/etc/containerd/config.toml)"}`
	for _, tc := range []struct {
		name   string
		config string
		nodes  []corev1.Node
		want   string
	}{
		{"not probed yet", empty, []corev1.Node{node("a", "")}, "none configured; no node probed yet"},
		{"no GPU anywhere", empty, []corev1.Node{node("a", noGPU), node("b", "")}, "no GPU found on any node (1 of 2 probed)"},
		{"a GPU node", gpu, []corev1.Node{node("a", noGPU), node("gpu", withGPU)},
			"configured: nvidia.com/gpu (2 mounts, 0 env vars); GPU nodes: gpu (driver 550.54.15, 2 GPU(s), driver mounted by mlkube)"},
		{"NVML did not answer", gpu, []corev1.Node{node("gpu", noNVML)},
			"configured: nvidia.com/gpu (2 mounts, 0 env vars); GPU nodes: gpu (driver 550.54.15, NVML did not answer, driver mounted by mlkube)"},
		{"written by hand", gpu, nil, "configured: nvidia.com/gpu (2 mounts, 0 env vars)"},
		{"GPU but empty config", empty, []corev1.Node{node("gpu", withGPU)}, "none configured; GPU nodes: gpu (driver 550.54.15, 2 GPU(s), driver mounted by mlkube)"},
		{"the runtime gives the driver", toolkit, []corev1.Node{node("dgx", byRuntime)},
			"configured: nvidia.com/gpu (nothing mounted: the nodes' runtime gives the driver); GPU nodes: dgx (driver 580.95.05, 8 GPU(s), driver given by the runtime: nvidia is containerd's default runtime (/etc/containerd/config.toml))"},
		{"some nodes' runtime gives the driver, others' does not", gpu, []corev1.Node{node("dgx", byRuntime), node("gpu", withGPU)},
			"configured: nvidia.com/gpu (2 mounts, 0 env vars); GPU nodes: dgx (driver 580.95.05, 8 GPU(s), driver given by the runtime: nvidia is containerd's default runtime (/etc/containerd/config.toml)), gpu (driver 550.54.15, 2 GPU(s), driver mounted by mlkube)"},
		{"broken config", "accelerators: [", []corev1.Node{node("a", noGPU)}, "accelerator config unreadable: "},
	} {
		if got := describeGPUs(tc.config, tc.nodes); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
