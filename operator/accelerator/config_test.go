package accelerator

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const gke = `accelerators:
  nvidia.com/gpu:
    volumes:
    - name: nvidia-libraries
      hostPath: /home/kubernetes/bin/nvidia/lib64
      mountPath: /usr/local/nvidia/lib64
    - name: nvidia-binaries
      hostPath: /home/kubernetes/bin/nvidia/bin
      mountPath: /usr/local/nvidia/bin
    envVars:
    - name: LD_LIBRARY_PATH
      value: /usr/local/nvidia/lib64
    - name: PATH
      value: /usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(gke))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Accelerators["nvidia.com/gpu"]
	if len(a.Volumes) != 2 || a.Volumes[1].HostPath != "/home/kubernetes/bin/nvidia/bin" || len(a.EnvVars) != 2 {
		t.Errorf("parsed %+v", a)
	}
	if _, err := Parse([]byte("accelerators: {}\n")); err != nil {
		t.Errorf("empty config: %v", err)
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"not yaml", "accelerators: [", "not valid YAML"},
		{"unknown field", "accelerators:\n  nvidia.com/gpu:\n    volume: []\n", `unknown field "volume"`},
		{"relative host path", "accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: lib, hostPath: usr/lib, mountPath: /usr/lib}\n",
			`accelerators["nvidia.com/gpu"].volumes[0].hostPath "usr/lib": must be an absolute path`},
		{"relative mount path", "accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: lib, hostPath: /usr/lib, mountPath: lib}\n",
			`accelerators["nvidia.com/gpu"].volumes[0].mountPath "lib": must be an absolute path`},
		{"bad volume name", "accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: Lib_64, hostPath: /a, mountPath: /b}\n",
			`accelerators["nvidia.com/gpu"].volumes[0].name "Lib_64"`},
		{"volume name twice", "accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: lib, hostPath: /a, mountPath: /b}\n    - {name: lib, hostPath: /c, mountPath: /d}\n",
			`volumes[1].name "lib": used twice`},
		{"bad env name", "accelerators:\n  nvidia.com/gpu:\n    envVars:\n    - {name: '1PATH', value: x}\n",
			`accelerators["nvidia.com/gpu"].envVars[0].name "1PATH"`},
		{"bad resource name", "accelerators:\n  'nvidia.com/gpu/x':\n    envVars: []\n", `accelerators["nvidia.com/gpu/x"]: not a resource name`},
		{"bad node label", "accelerators:\n  nvidia.com/gpu:\n    nodeSelector: {'a b': x}\n", `accelerators["nvidia.com/gpu"].nodeSelector["a b"]: not a label name`},
		{"bad node label value", "accelerators:\n  nvidia.com/gpu:\n    nodeSelector: {mlkube.io/gpu-driver-layout: 'x y'}\n",
			`accelerators["nvidia.com/gpu"].nodeSelector["mlkube.io/gpu-driver-layout"] "x y": not a label value`},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestInject(t *testing.T) {
	c, err := Parse([]byte(gke))
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	spec := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "limits", Resources: corev1.ResourceRequirements{Limits: gpu}},
		{Name: "requests", Resources: corev1.ResourceRequirements{Requests: gpu},
			// The container's own PATH wins over the config's.
			Env: []corev1.EnvVar{{Name: "PATH", Value: "/mine"}}},
		{Name: "cpu"},
	}}
	c.Inject(&spec)
	if len(spec.Volumes) != 2 || spec.Volumes[0].HostPath.Path != "/home/kubernetes/bin/nvidia/lib64" {
		t.Fatalf("volumes %+v: want each once", spec.Volumes)
	}
	for _, i := range []int{0, 1} {
		ctr := spec.Containers[i]
		if len(ctr.VolumeMounts) != 2 || !ctr.VolumeMounts[0].ReadOnly || ctr.VolumeMounts[1].MountPath != "/usr/local/nvidia/bin" {
			t.Errorf("%s mounts %+v", ctr.Name, ctr.VolumeMounts)
		}
	}
	if env := spec.Containers[0].Env; len(env) != 2 || env[0].Value != "/usr/local/nvidia/lib64" {
		t.Errorf("limits env %+v", env)
	}
	if env := spec.Containers[1].Env; len(env) != 2 || env[0].Value != "/mine" {
		t.Errorf("requests env %+v: the container's PATH must stay", env)
	}
	if cpu := spec.Containers[2]; len(cpu.VolumeMounts) != 0 || len(cpu.Env) != 0 {
		t.Errorf("a container without a GPU got %+v %+v", cpu.VolumeMounts, cpu.Env)
	}

	if len(spec.NodeSelector) != 0 {
		t.Errorf("node selector %v from a config without one", spec.NodeSelector)
	}

	// Injecting twice changes nothing.
	before := spec.DeepCopy()
	c.Inject(&spec)
	if len(spec.Volumes) != len(before.Volumes) || len(spec.Containers[0].VolumeMounts) != 2 || len(spec.Containers[0].Env) != 2 {
		t.Errorf("second inject changed the pod: %+v", spec)
	}
}

// A config's node selector reaches pods with a container that uses the resource, and only those;
// a label the pod selects on itself stays as the pod has it.
func TestInjectNodeSelector(t *testing.T) {
	c, err := Parse([]byte("accelerators:\n  nvidia.com/gpu:\n    nodeSelector: {mlkube.io/gpu-driver-layout: d67174b10edd}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	withGPU := corev1.PodSpec{NodeSelector: map[string]string{"pool": "a100"}, Containers: []corev1.Container{{Name: "cpu"}, {Name: "gpu", Resources: corev1.ResourceRequirements{Limits: gpu}}}}
	c.Inject(&withGPU)
	if want := map[string]string{"pool": "a100", LayoutLabel: "d67174b10edd"}; !maps.Equal(withGPU.NodeSelector, want) {
		t.Errorf("node selector %v, want %v", withGPU.NodeSelector, want)
	}
	cpuOnly := corev1.PodSpec{Containers: []corev1.Container{{Name: "cpu"}}}
	c.Inject(&cpuOnly)
	if cpuOnly.NodeSelector != nil {
		t.Errorf("a pod without a GPU container got node selector %v", cpuOnly.NodeSelector)
	}
	pinned := corev1.PodSpec{NodeSelector: map[string]string{LayoutLabel: "3373314bb641"}, Containers: []corev1.Container{{Name: "gpu", Resources: corev1.ResourceRequirements{Requests: gpu}}}}
	c.Inject(&pinned)
	if pinned.NodeSelector[LayoutLabel] != "3373314bb641" {
		t.Errorf("the pod's own choice of layout was replaced: %v", pinned.NodeSelector)
	}
}
