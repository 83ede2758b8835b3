package publish

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
	"github.com/mlkube/mlkube/operator/accelerator"
)

func TestPublishWritesConfigAndAnnotatesNode(t *testing.T) {
	p := setup(t)
	a := node(t, p, "gpu-a")
	f := gkeFinding()
	publish(t, p, gpu(a, f))

	sameConfig(t, published(t, p), f.Config)
	cm := configMap(t, p)
	if _, ok := cm.Data[KeyConflicts]; ok {
		t.Errorf("%s written with one layout", KeyConflicts)
	}
	var state State
	must(t, yaml.Unmarshal([]byte(cm.Data[KeyLayouts]), &state))
	id := LayoutID(f.Config)
	if state.Published != id || !slices.Equal(state.Layouts[id].Nodes, []string{a}) {
		t.Errorf("%s: %+v", KeyLayouts, cm.Data[KeyLayouts])
	}

	s, n := summary(t, a)
	if !s.GPU || s.Layout != id || s.DriverVersion != "550.54.15" || s.GPUs != 2 ||
		!slices.Equal(s.Models, []string{"NVIDIA A100-SXM4-40GB"}) || !slices.Contains(s.Libraries, "/home/kubernetes/bin/nvidia/lib64/libcuda.so.1") {
		t.Errorf("node summary: %+v", s)
	}
	// Only our annotation was written.
	if n.Labels["team"] != "ml" || n.Annotations["example.com/other"] != "kept" || len(n.Annotations) != 2 {
		t.Errorf("the node's other metadata changed: labels %v annotations %v", n.Labels, n.Annotations)
	}
	if got := reasons(events(t, p)); !slices.Equal(got, []string{ReasonPublished}) {
		t.Errorf("events: %v", got)
	}

	// The same finding again writes nothing.
	nodeRV := n.ResourceVersion
	publish(t, p, gpu(a, f))
	if configMap(t, p).ResourceVersion != cm.ResourceVersion {
		t.Error("the ConfigMap was rewritten though nothing changed")
	}
	if _, n := summary(t, a); n.ResourceVersion != nodeRV {
		t.Error("the node was patched though nothing changed")
	}
	if len(events(t, p)) != 1 {
		t.Error("an unchanged probe recorded an event")
	}
}

// A node without a GPU only annotates itself: it creates no ConfigMap, and it never empties a
// good config, not even when the last GPU node loses its driver.
func TestNoGPUNodeNeverEmptiesTheConfig(t *testing.T) {
	p := setup(t)
	cpu, a := node(t, p, "cpu"), node(t, p, "gpu-a")

	publish(t, p, noGPU(cpu))
	if configMap(t, p) != nil {
		t.Fatal("a node without a GPU created the ConfigMap")
	}
	if s, _ := summary(t, cpu); s.GPU || !strings.Contains(s.Reason, "no NVIDIA driver found") {
		t.Errorf("cpu node summary: %+v", s)
	}

	// The ConfigMap as the operator's manifests ship it: left exactly as it is.
	shipped := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		Data:       map[string]string{KeyConfig: "accelerators: {}\n"},
	}
	must(t, p.Client.Create(context.Background(), shipped))
	publish(t, p, noGPU(cpu))
	if cm := configMap(t, p); cm.ResourceVersion != shipped.ResourceVersion || len(cm.Data) != 1 {
		t.Errorf("a node without a GPU wrote the operator's empty ConfigMap: %v", cm.Data)
	}

	f := debianFinding()
	publish(t, p, gpu(a, f))
	before := configMap(t, p)
	publish(t, p, noGPU(cpu))
	if configMap(t, p).ResourceVersion != before.ResourceVersion {
		t.Error("a node without a GPU rewrote the ConfigMap")
	}

	// The GPU node's driver goes away: its record goes, the config stays.
	publish(t, p, noGPU(a))
	sameConfig(t, published(t, p), f.Config)
	if s, _ := summary(t, a); s.GPU {
		t.Errorf("gpu-a still says it has a GPU: %+v", s)
	}
	var state State
	must(t, yaml.Unmarshal([]byte(configMap(t, p).Data[KeyLayouts]), &state))
	if len(state.Layouts) != 0 {
		t.Errorf("layouts after the last GPU node left: %+v", state.Layouts)
	}

	// A finding whose config is empty counts as no GPU too.
	publish(t, p, gpu(a, &driver.Finding{Config: accelerator.Config{Accelerators: map[string]accelerator.Accelerator{}}}))
	sameConfig(t, published(t, p), f.Config)
}

// Nodes that disagree: the first layout stays on a tie, the majority wins, conflicts.yaml and a
// warning event say who is on which, and agreement again removes the conflict.
func TestConflictingLayouts(t *testing.T) {
	p := setup(t)
	a, b, c := node(t, p, "gpu-a"), node(t, p, "gpu-b"), node(t, p, "gpu-c")
	gke, deb := gkeFinding(), debianFinding()
	gkeID, debID := LayoutID(gke.Config), LayoutID(deb.Config)

	publish(t, p, gpu(a, gke))
	publish(t, p, gpu(b, deb))
	sameConfig(t, published(t, p), gke.Config) // 1:1, the published one stays
	var conflicts Conflicts
	must(t, yaml.Unmarshal([]byte(configMap(t, p).Data[KeyConflicts]), &conflicts))
	if conflicts.Published != gkeID || conflicts.Nodes[a] != gkeID || conflicts.Nodes[b] != debID ||
		!slices.Contains(conflicts.Layouts[debID], "/usr/bin/nvidia-smi") || !strings.Contains(conflicts.Message, "reported by 1 of 2 GPU nodes") {
		t.Errorf("%s:\n%s", KeyConflicts, configMap(t, p).Data[KeyConflicts])
	}
	evs := events(t, p)
	if got := reasons(evs); !slices.Equal(got, []string{ReasonPublished, ReasonConflict}) {
		t.Fatalf("events: %v", got)
	}
	if e := evs[1]; e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, b) || e.Related.Name != b {
		t.Errorf("conflict event: %+v", e)
	}

	publish(t, p, gpu(c, deb)) // 2:1 for Debian
	sameConfig(t, published(t, p), deb.Config)
	must(t, yaml.Unmarshal([]byte(configMap(t, p).Data[KeyConflicts]), &conflicts))
	if conflicts.Published != debID || !strings.Contains(conflicts.Message, "reported by 2 of 3 GPU nodes") {
		t.Errorf("%s:\n%s", KeyConflicts, configMap(t, p).Data[KeyConflicts])
	}
	if got := reasons(events(t, p)); !slices.Equal(got, []string{ReasonPublished, ReasonConflict, ReasonPublished}) {
		t.Errorf("events: %v", got)
	}

	publish(t, p, gpu(a, deb)) // gpu-a reinstalled the Debian way: all agree
	if _, ok := configMap(t, p).Data[KeyConflicts]; ok {
		t.Errorf("%s still there after the nodes agree", KeyConflicts)
	}
	sameConfig(t, published(t, p), deb.Config)
}

// Nodes whose runtime gives containers the driver (the NVIDIA container toolkit) and nodes
// where mlkube mounts it: each node says which in its annotation, conflicts.yaml names which node
// is which, and when the runtime's nodes are the most, the published config mounts nothing and
// sends GPU pods there.
func TestRuntimeNodesBesideMountedNodes(t *testing.T) {
	p := setup(t)
	a, b, c := node(t, p, "dgx-a"), node(t, p, "dgx-b"), node(t, p, "gpu-c")
	tk, deb := toolkitFinding(), debianFinding()
	tkID, debID := LayoutID(tk.Config), LayoutID(deb.Config)

	publish(t, p, gpu(c, deb))
	publish(t, p, gpu(a, tk))
	publish(t, p, gpu(b, tk)) // 2:1 for the runtime
	cfg := published(t, p)
	if got := cfg.Accelerators[driver.Resource]; got.Runtime != accelerator.RuntimeNVIDIA || len(got.Volumes) != 0 || got.NodeSelector[accelerator.LayoutLabel] != tkID {
		t.Errorf("published %+v, want the runtime's layout: nothing mounted, pods sent to layout %s", got, tkID)
	}
	var conflicts Conflicts
	must(t, yaml.Unmarshal([]byte(configMap(t, p).Data[KeyConflicts]), &conflicts))
	if conflicts.Nodes[a] != tkID || conflicts.Nodes[c] != debID || !slices.Equal(conflicts.Layouts[tkID], []string{"runtime: " + accelerator.RuntimeNVIDIA}) ||
		!slices.Contains(conflicts.Layouts[debID], "/usr/bin/nvidia-smi") {
		t.Errorf("%s:\n%s", KeyConflicts, configMap(t, p).Data[KeyConflicts])
	}
	for n, want := range map[string]string{a: "nvidia is containerd's default runtime (/etc/containerd/config.toml)", c: ""} {
		if s, node := summary(t, n); s.Runtime != want || node.Labels[accelerator.LayoutLabel] != conflicts.Nodes[n] {
			t.Errorf("node %s: summary runtime %q, label %q; want %q and its layout", n, s.Runtime, node.Labels[accelerator.LayoutLabel], want)
		}
	}
}

// Many nodes writing at once: resourceVersion conflicts make them retry, and no record is lost.
func TestConcurrentNodesLoseNothing(t *testing.T) {
	p := setup(t)
	var nodes []string
	for i := range 8 {
		nodes = append(nodes, node(t, p, fmt.Sprintf("gpu-%d", i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for i, n := range nodes {
		f := debianFinding()
		if i < 3 {
			f = gkeFinding()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.Publish(context.Background(), gpu(n, f))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	var state State
	must(t, yaml.Unmarshal([]byte(configMap(t, p).Data[KeyLayouts]), &state))
	var recorded []string
	for _, l := range state.Layouts {
		recorded = append(recorded, l.Nodes...)
	}
	slices.Sort(recorded)
	if !slices.Equal(recorded, nodes) {
		t.Errorf("recorded %v, want all of %v", recorded, nodes)
	}
	sameConfig(t, published(t, p), debianFinding().Config) // 5 against 3
}

// Entries nodeprobe does not own (another vendor's resource, written by hand) are kept; its own
// are replaced, the legacy resource included.
func TestKeepsOtherResources(t *testing.T) {
	p := setup(t)
	a := node(t, p, "gpu-a")
	amd := accelerator.Accelerator{Volumes: []accelerator.Volume{{Name: "rocm", HostPath: "/opt/rocm", MountPath: "/opt/rocm"}}}
	old := accelerator.Config{Accelerators: map[string]accelerator.Accelerator{
		"amd.com/gpu":         amd,
		driver.Resource:       {Volumes: []accelerator.Volume{{Name: "old", HostPath: "/old", MountPath: "/old"}}},
		driver.LegacyResource: {Volumes: []accelerator.Volume{{Name: "old", HostPath: "/old", MountPath: "/old"}}},
	}}
	data, err := yaml.Marshal(old)
	must(t, err)
	must(t, k8s.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		Data:       map[string]string{KeyConfig: string(data), KeyLayouts: "this: [is not, a record"},
	}))
	f := gkeFinding()
	publish(t, p, gpu(a, f))
	want := accelerator.Config{Accelerators: map[string]accelerator.Accelerator{
		"amd.com/gpu": amd, driver.Resource: f.Config.Accelerators[driver.Resource],
	}}
	sameConfig(t, published(t, p), want)
}

func TestChoose(t *testing.T) {
	cfg := func(p string) *accelerator.Config {
		return &accelerator.Config{Accelerators: map[string]accelerator.Accelerator{driver.Resource: {Volumes: []accelerator.Volume{{Name: "x", HostPath: p, MountPath: "/x"}}}}}
	}
	x, y := LayoutID(*cfg("/x")), LayoutID(*cfg("/y"))
	var s State
	if s.Choose() != "" || s.Published != "" {
		t.Error("a choice with no layouts")
	}
	s.Record("a", cfg("/y"))
	s.Record("b", cfg("/x"))
	if got := s.Choose(); got != min(x, y) {
		t.Errorf("tie with nothing published: %s, want the lower ID %s", got, min(x, y))
	}
	s.Published = y
	if got := s.Choose(); got != y {
		t.Errorf("tie: %s, want the published %s", got, y)
	}
	s.Record("c", cfg("/x"))
	if got := s.Choose(); got != x {
		t.Errorf("2:1: %s, want %s", got, x)
	}
	if changed := s.Record("c", cfg("/x")); changed {
		t.Error("recording the same layout again changed the state")
	}
	s.Record("b", nil)
	s.Record("c", nil)
	if got := s.Choose(); got != y || len(s.Layouts) != 1 {
		t.Errorf("after two nodes left: %s, layouts %v", got, s.Layouts)
	}
	s.Record("a", nil)
	if got := s.Choose(); got != "" || s.Published != y {
		t.Errorf("with no layouts: chose %q, published %q; want nothing chosen and %s kept", got, s.Published, y)
	}
}

// A node deleted from the cluster cannot remove its record; the others' probes do, and the
// layout it kept in the majority loses it.
func TestDeletedNodesAreForgotten(t *testing.T) {
	p := setup(t)
	a, b, c := node(t, p, "gpu-a"), node(t, p, "gpu-b"), node(t, p, "gpu-c")
	publish(t, p, gpu(a, debianFinding()))
	publish(t, p, gpu(b, gkeFinding()))
	publish(t, p, gpu(c, gkeFinding()))
	sameConfig(t, published(t, p), gkeFinding().Config) // 2:1 for GKE
	for _, n := range []string{b, c} {
		must(t, k8s.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	for range 2 { // each probe checks one other node
		publish(t, p, gpu(a, debianFinding()))
	}
	var state State
	must(t, yaml.Unmarshal([]byte(configMap(t, p).Data[KeyLayouts]), &state))
	if len(state.Layouts) != 1 || !slices.Equal(state.Layouts[LayoutID(debianFinding().Config)].Nodes, []string{a}) {
		t.Errorf("%s:\n%s", KeyLayouts, configMap(t, p).Data[KeyLayouts])
	}
	sameConfig(t, published(t, p), debianFinding().Config)
	if _, ok := configMap(t, p).Data[KeyConflicts]; ok {
		t.Errorf("%s still there", KeyConflicts)
	}
}
