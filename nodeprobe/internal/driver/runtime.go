package driver

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"sigs.k8s.io/yaml"
)

// Runtime says that the node's container runtime gives containers the driver by itself: the
// NVIDIA container toolkit (installed by hand, or by NVIDIA's GPU Operator) as the runtime's
// default, or CDI specs for NVIDIA's devices, which the device plugin names and the runtime
// applies. There the operator mounts nothing: the runtime already mounts each driver file
// (and runs ldconfig), and a second set of mounts would at best hide the first.
type Runtime struct {
	// How is the evidence, in words: "nvidia is containerd's default runtime".
	How string `json:"how"`
	// Path is the host file that says so.
	Path string `json:"path"`
}

// runtimeConfigs are where container runtimes read their config, with the key that names the
// default runtime: containerd's own (and its drop-ins, where toolkit 1.17 and later write),
// k3s's and RKE2's copies of it, and CRI-O's.
var runtimeConfigs = []struct {
	runtime, dir, glob, key string
}{
	{"containerd", "/etc/containerd", "config.toml", "default_runtime_name"},
	{"containerd", "/etc/containerd/conf.d", "*.toml", "default_runtime_name"},
	{"containerd", "/var/lib/rancher/k3s/agent/etc/containerd", "config.toml", "default_runtime_name"},
	{"containerd", "/var/lib/rancher/rke2/agent/etc/containerd", "config.toml", "default_runtime_name"},
	{"CRI-O", "/etc/crio", "crio.conf", "default_runtime"},
	{"CRI-O", "/etc/crio/crio.conf.d", "*", "default_runtime"},
}

// cdiDirs are where CDI specs live (the CDI spec's own defaults).
var cdiDirs = []string{"/etc/cdi", "/var/run/cdi"}

// cdiKind is the device kind of NVIDIA's CDI specs (nvidia-ctk cdi generate).
const cdiKind = "nvidia.com/gpu"

// runtimeDriver looks at the node's runtime config (under root, the node's own, not a driver
// tree's) and says whether it gives containers the driver. A file it cannot read or parse is a
// problem noted in t, never a yes.
func runtimeDriver(root Root, t *tree) *Runtime {
	for _, rc := range runtimeConfigs {
		for _, file := range matching(root, t, rc.dir, rc.glob) {
			data, err := root.ReadFile(file)
			if err != nil {
				t.problem("cannot read %s: %s", file, short(err))
				continue
			}
			var doc map[string]any
			if _, err := toml.Decode(string(data), &doc); err != nil {
				t.problem("cannot read %s's config %s: %s", rc.runtime, file, firstLine(err.Error()))
				continue
			}
			if name, ok := findKey(doc, rc.key); ok && strings.HasPrefix(name, "nvidia") {
				return &Runtime{How: fmt.Sprintf("%s is %s's default runtime", name, rc.runtime), Path: file}
			}
		}
	}
	for _, dir := range cdiDirs {
		for _, file := range matching(root, t, dir, "*") {
			switch path.Ext(file) {
			case ".yaml", ".yml", ".json":
			default:
				continue // CDI reads only these
			}
			data, err := root.ReadFile(file)
			if err != nil {
				t.problem("cannot read %s: %s", file, short(err))
				continue
			}
			var spec struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(data, &spec); err != nil {
				t.problem("cannot read the CDI spec %s: %s", file, firstLine(err.Error()))
				continue
			}
			if spec.Kind == cdiKind {
				return &Runtime{How: "a CDI spec gives " + cdiKind + " devices", Path: file}
			}
		}
	}
	return nil
}

// matching lists the files of dir whose names match glob, in order.
func matching(root Root, t *tree, dir, glob string) []string {
	names, err := root.ReadDir(dir)
	if err != nil {
		t.problem("cannot list %s: %s", dir, short(err))
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if ok, _ := path.Match(glob, n); ok && root.IsFile(path.Join(dir, n)) {
			out = append(out, path.Join(dir, n))
		}
	}
	return out
}

// findKey finds key's string value in a parsed TOML document, at any depth: containerd's
// config names its CRI plugin differently in each config version
// (plugins."io.containerd.grpc.v1.cri".containerd in version 2, "io.containerd.cri.v1.runtime"
// in version 3), CRI-O's puts it under crio.runtime.
func findKey(doc map[string]any, key string) (string, bool) {
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := doc[k].(type) {
		case string:
			if k == key {
				return v, true
			}
		case map[string]any:
			if s, ok := findKey(v, key); ok {
				return s, true
			}
		}
	}
	return "", false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
