// Package accelerator reads the accelerator config (which host paths and env vars a container
// that asks for a GPU needs) and applies it to pods. nodeprobe writes that config; the operator
// reads it from a file, usually a mounted ConfigMap, and reloads it when it changes.
package accelerator

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Config maps an extended resource name (nvidia.com/gpu) to what its containers need.
type Config struct {
	Accelerators map[string]Accelerator `json:"accelerators"`
}

// Accelerator is what a container using one kind of accelerator gets.
type Accelerator struct {
	// Volumes are mounted read-only into the container. One name may be mounted at several
	// paths (the same hostPath each time): nodeprobe mounts each driver library into the
	// library directories of both Debian's and RHEL's families of images.
	Volumes []Volume `json:"volumes,omitempty"`
	// EnvVars are set in the container unless it sets them itself. PATH and LD_LIBRARY_PATH
	// never are (see Inject).
	EnvVars []EnvVar `json:"envVars,omitempty"`
	// Runtime, when set, says the nodes' container runtime gives such containers the driver
	// itself (RuntimeNVIDIA: the NVIDIA container toolkit, by its runtime or CDI specs), so
	// there is nothing to mount; the node selector still keeps the pods on those nodes.
	Runtime string `json:"runtime,omitempty"`
	// NodeSelector keeps a pod with such a container on nodes with these labels. nodeprobe
	// sets it to the published driver layout (LayoutLabel), so that where GPU nodes disagree,
	// GPU containers run only where the paths they get mount the driver.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// LayoutLabel is the Node label where nodeprobe puts the ID of the node's driver layout.
const LayoutLabel = "mlkube.io/gpu-driver-layout"

// RuntimeNVIDIA is Accelerator.Runtime on nodes where the NVIDIA container toolkit gives
// containers the driver.
const RuntimeNVIDIA = "nvidia-container-toolkit"

// imageEnv are the variables an image's own ENV sets for its programs and libraries. A pod's
// env wins over the image's, so setting one would replace the image's value, not add to it:
// an image with its Python in /opt/conda/bin or a virtual environment would lose it. An older
// nodeprobe published both; Inject skips them whoever wrote the config.
var imageEnv = []string{"PATH", "LD_LIBRARY_PATH"}

// NodeAnnotation is the Node annotation where each node's nodeprobe says, as JSON, what it found
// (nodeprobe's publish.NodeSummary); devctl status reads it back.
const NodeAnnotation = "mlkube.io/gpu-driver"

// Volume is a host directory mounted read-only into the container.
type Volume struct {
	Name      string `json:"name"`
	HostPath  string `json:"hostPath"`
	MountPath string `json:"mountPath"`
}

// EnvVar is set in the container unless the container sets it itself.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Parse reads a config and checks it, naming the field at fault.
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		if strings.Contains(err.Error(), "unsupported map key of type: %!s(<nil>)") {
			// sigs.k8s.io/yaml's words for a null mapping key (~: x), through a broken
			// format verb: "unsupported map key of type: %!s(<nil>), key: <nil>, ...".
			err = errors.New("a mapping key is null (~ or null); keys must be names, such as accelerators")
		}
		return nil, fmt.Errorf("accelerator config is not valid YAML of the expected shape: %w", err)
	}
	return &c, c.Validate()
}

// Validate checks names and paths; every error names its field.
func (c *Config) Validate() error {
	var errs []error
	// A pod has one volume of a name, whichever resources its containers ask for, so a name
	// that two resources share must be the same host path (nodeprobe writes the same volumes
	// under each of a node's resource names); else a container could get another's driver.
	type firstUse struct{ at, hostPath string }
	shared := map[string]firstUse{}
	for _, res := range c.resources() {
		a := c.Accelerators[res]
		at := fmt.Sprintf("accelerators[%q]", res)
		if msgs := validation.IsQualifiedName(res); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: not a resource name: %v", at, msgs))
		}
		names := map[string]bool{}
		for i, v := range a.Volumes {
			f := fmt.Sprintf("%s.volumes[%d]", at, i)
			if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.name %q: %v", f, v.Name, msgs))
			}
			if first, ok := shared[v.Name]; names[v.Name] && ok && first.hostPath == v.HostPath {
				// The same volume mounted at another path.
			} else if names[v.Name] {
				errs = append(errs, fmt.Errorf("%s.name %q: used twice with different hostPaths; give each hostPath its own name", f, v.Name))
			} else if first, ok := shared[v.Name]; ok && first.hostPath != v.HostPath {
				errs = append(errs, fmt.Errorf("%s.name %q: %s already gives this name to hostPath %q, and a pod has one volume per name: rename one of them", f, v.Name, first.at, first.hostPath))
			} else if !ok {
				shared[v.Name] = firstUse{at: f, hostPath: v.HostPath}
			}
			names[v.Name] = true
			if !path.IsAbs(v.HostPath) {
				errs = append(errs, fmt.Errorf("%s.hostPath %q: must be an absolute path", f, v.HostPath))
			}
			if !path.IsAbs(v.MountPath) {
				errs = append(errs, fmt.Errorf("%s.mountPath %q: must be an absolute path", f, v.MountPath))
			}
		}
		if a.Runtime != "" && a.Runtime != RuntimeNVIDIA {
			errs = append(errs, fmt.Errorf("%s.runtime %q: unknown; the one value is %q (the nodes' runtime gives the driver)", at, a.Runtime, RuntimeNVIDIA))
		}
		if a.Runtime != "" && len(a.Volumes) > 0 {
			errs = append(errs, fmt.Errorf("%s: runtime %q gives containers the driver, and volumes would mount it a second time: drop one of them", at, a.Runtime))
		}
		for i, e := range a.EnvVars {
			if msgs := validation.IsEnvVarName(e.Name); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.envVars[%d].name %q: %v", at, i, e.Name, msgs))
			}
		}
		for _, k := range sortedKeys(a.NodeSelector) {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.nodeSelector[%q]: not a label name: %v", at, k, msgs))
			}
			if msgs := validation.IsValidLabelValue(a.NodeSelector[k]); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.nodeSelector[%q] %q: not a label value: %v", at, k, a.NodeSelector[k], msgs))
			}
		}
	}
	return errors.Join(errs...)
}

// HostPaths is how many host paths a resource's volumes mount, each counted once however many
// places it is mounted at.
func HostPaths(a Accelerator) int {
	seen := map[string]bool{}
	for _, v := range a.Volumes {
		seen[v.HostPath] = true
	}
	return len(seen)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c *Config) resources() []string {
	var out []string
	for r := range c.Accelerators {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Inject gives every container that requests or limits one of the configured resources that
// resource's volumes (read-only) and env vars, and the pod the resource's node selector. What the
// pod already defines wins: a volume of the same name, a mount at the same path, an env var of
// the same name, or a node selector on the same label are left as they are. PATH and
// LD_LIBRARY_PATH are never set (imageEnv): the container keeps its image's own.
func (c *Config) Inject(spec *corev1.PodSpec) {
	if c == nil {
		return
	}
	for _, res := range c.resources() {
		a := c.Accelerators[res]
		for i := range spec.Containers {
			ctr := &spec.Containers[i]
			if !uses(ctr, corev1.ResourceName(res)) {
				continue
			}
			for _, v := range a.Volumes {
				addVolume(spec, v)
				if !hasMount(ctr, v.MountPath) {
					ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: v.MountPath, ReadOnly: true})
				}
			}
			for _, e := range a.EnvVars {
				if !hasEnv(ctr, e.Name) && !slices.Contains(imageEnv, e.Name) {
					ctr.Env = append(ctr.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
				}
			}
			for k, v := range a.NodeSelector {
				if _, set := spec.NodeSelector[k]; !set {
					if spec.NodeSelector == nil {
						spec.NodeSelector = map[string]string{}
					}
					spec.NodeSelector[k] = v
				}
			}
		}
	}
}

func uses(c *corev1.Container, res corev1.ResourceName) bool {
	_, req := c.Resources.Requests[res]
	_, lim := c.Resources.Limits[res]
	return req || lim
}

func addVolume(spec *corev1.PodSpec, v Volume) {
	for _, have := range spec.Volumes {
		if have.Name == v.Name {
			return
		}
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         v.Name,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.HostPath}},
	})
}

func hasMount(c *corev1.Container, mountPath string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == mountPath {
			return true
		}
	}
	return false
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
