package accelerator

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// debian is what nodeprobe publishes for a Debian node: each file mounted on its own into the
// image's own directories, libraries into both families' library directories.
const debian = `accelerators:
  nvidia.com/gpu:
    volumes:
    - {name: nvidia-lib-libcuda-so-1, hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, mountPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1}
    - {name: nvidia-lib-libcuda-so-1, hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, mountPath: /usr/lib64/libcuda.so.1}
    - {name: nvidia-bin-nvidia-smi, hostPath: /usr/bin/nvidia-smi, mountPath: /usr/bin/nvidia-smi}
`

// before is what nodeprobe published before: mounts under /usr/local/nvidia and the env to find
// them there. A cluster upgraded before its nodeprobe republished still has it.
const before = `accelerators:
  nvidia.com/gpu:
    volumes:
    - name: nvidia-libraries
      hostPath: /home/kubernetes/bin/nvidia/lib64
      mountPath: /usr/local/nvidia/lib64
    envVars:
    - name: LD_LIBRARY_PATH
      value: /usr/local/nvidia/lib64
    - name: PATH
      value: /usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    - name: NVIDIA_DRIVER_CAPABILITIES
      value: compute,utility
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(debian))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Accelerators["nvidia.com/gpu"]
	if len(a.Volumes) != 3 || a.Volumes[1].MountPath != "/usr/lib64/libcuda.so.1" || len(a.EnvVars) != 0 {
		t.Errorf("parsed %+v", a)
	}
	if _, err := Parse([]byte(before)); err != nil {
		t.Errorf("an older nodeprobe's config: %v", err)
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
			`volumes[1].name "lib": used twice with different hostPaths`},
		{"runtime and volumes", "accelerators:\n  nvidia.com/gpu:\n    runtime: nvidia-container-toolkit\n    volumes:\n    - {name: lib, hostPath: /a, mountPath: /b}\n",
			`accelerators["nvidia.com/gpu"]: runtime "nvidia-container-toolkit" gives containers the driver, and volumes would mount it a second time`},
		{"unknown runtime", "accelerators:\n  nvidia.com/gpu:\n    runtime: docker\n",
			`accelerators["nvidia.com/gpu"].runtime "docker": unknown; the one value is "nvidia-container-toolkit"`},
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
	c, err := Parse([]byte(debian))
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	spec := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "limits", Resources: corev1.ResourceRequirements{Limits: gpu}},
		{Name: "requests", Resources: corev1.ResourceRequirements{Requests: gpu},
			// A mount the container has at one of the paths stays its own.
			VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: "/usr/bin/nvidia-smi"}}},
		{Name: "cpu"},
	}}
	c.Inject(&spec)
	if len(spec.Volumes) != 2 || spec.Volumes[0].Name != "nvidia-lib-libcuda-so-1" || spec.Volumes[0].HostPath.Path != "/usr/lib/x86_64-linux-gnu/libcuda.so.1" {
		t.Fatalf("volumes %+v: want each file once, whatever the places it is mounted", spec.Volumes)
	}
	mounts := func(ctr corev1.Container) []string {
		var out []string
		for _, m := range ctr.VolumeMounts {
			if !m.ReadOnly && m.Name != "mine" {
				t.Errorf("%s: %s mounted writable", ctr.Name, m.MountPath)
			}
			out = append(out, m.Name+":"+m.MountPath)
		}
		return out
	}
	if got, want := mounts(spec.Containers[0]), []string{
		"nvidia-lib-libcuda-so-1:/usr/lib/x86_64-linux-gnu/libcuda.so.1", "nvidia-lib-libcuda-so-1:/usr/lib64/libcuda.so.1",
		"nvidia-bin-nvidia-smi:/usr/bin/nvidia-smi",
	}; !slices.Equal(got, want) {
		t.Errorf("limits mounts %q, want %q", got, want)
	}
	if got, want := mounts(spec.Containers[1]), []string{
		"mine:/usr/bin/nvidia-smi",
		"nvidia-lib-libcuda-so-1:/usr/lib/x86_64-linux-gnu/libcuda.so.1", "nvidia-lib-libcuda-so-1:/usr/lib64/libcuda.so.1",
	}; !slices.Equal(got, want) {
		t.Errorf("requests mounts %q, want %q", got, want)
	}
	for _, ctr := range spec.Containers {
		if len(ctr.Env) != 0 {
			t.Errorf("%s got env %+v: it must keep its image's own", ctr.Name, ctr.Env)
		}
	}
	if cpu := spec.Containers[2]; len(cpu.VolumeMounts) != 0 {
		t.Errorf("a container without a GPU got %+v", cpu.VolumeMounts)
	}
	if len(spec.NodeSelector) != 0 {
		t.Errorf("node selector %v from a config without one", spec.NodeSelector)
	}

	// Injecting twice changes nothing.
	again := spec.DeepCopy()
	c.Inject(again)
	if !reflect.DeepEqual(again, &spec) {
		t.Errorf("second inject changed the pod: %+v", again)
	}
}

// An older config's PATH and LD_LIBRARY_PATH are never set: a pod's env wins over the image's
// ENV, and would take the image's own Python off its PATH. Other variables still are, unless
// the container sets them.
func TestInjectKeepsTheImagesEnv(t *testing.T) {
	c, err := Parse([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	spec := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "plain", Resources: corev1.ResourceRequirements{Limits: gpu}},
		{Name: "own", Resources: corev1.ResourceRequirements{Limits: gpu}, Env: []corev1.EnvVar{{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "all"}}},
	}}
	c.Inject(&spec)
	if got := spec.Containers[0].Env; !slices.Equal(got, []corev1.EnvVar{{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "compute,utility"}}) {
		t.Errorf("env %+v, want NVIDIA_DRIVER_CAPABILITIES alone", got)
	}
	if got := spec.Containers[1].Env; !slices.Equal(got, []corev1.EnvVar{{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "all"}}) {
		t.Errorf("env %+v: the container's own value must stay", got)
	}
}

// Where the nodes' runtime gives the driver, a GPU pod gets the node selector and nothing else.
func TestInjectRuntimeGivesTheDriver(t *testing.T) {
	c, err := Parse([]byte("accelerators:\n  nvidia.com/gpu:\n    runtime: nvidia-container-toolkit\n    nodeSelector: {mlkube.io/gpu-driver-layout: 5e3f0c2a9b1d}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "gpu", Resources: corev1.ResourceRequirements{Limits: gpu}}}}
	c.Inject(&spec)
	if len(spec.Volumes) != 0 || len(spec.Containers[0].VolumeMounts) != 0 || len(spec.Containers[0].Env) != 0 {
		t.Errorf("the runtime gives the driver, yet the pod got %+v", spec)
	}
	if spec.NodeSelector[LayoutLabel] != "5e3f0c2a9b1d" {
		t.Errorf("node selector %v: the pod must go where the runtime gives the driver", spec.NodeSelector)
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
