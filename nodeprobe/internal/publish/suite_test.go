package publish

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
	"github.com/mlkube/mlkube/operator/accelerator"
)

// These tests publish against a real kube-apiserver and etcd (envtest): optimistic concurrency,
// merge patches, events and RBAC are the apiserver's, not a fake's.

var k8s client.Client

func TestMain(m *testing.M) { jobtest.Main(m, func() { k8s = jobtest.Client }) }

// testLogger logs to the test, shown when it fails or with -v.
func testLogger(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})
}

// setup gives a test its own namespace for the ConfigMap and a publisher writing there.
func setup(t *testing.T) *Publisher {
	t.Helper()
	ns := jobtest.Namespace(t)
	return &Publisher{Client: k8s, Namespace: ns, Name: "mlkube-accelerators", Log: testLogger(t)}
}

// node creates a Node named after the test (nodes are cluster-wide) and returns its name.
func node(t *testing.T, p *Publisher, name string) string {
	t.Helper()
	full := p.Namespace + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        full,
		Labels:      map[string]string{"team": "ml"},
		Annotations: map[string]string{"example.com/other": "kept"},
	}}
	must(t, k8s.Create(context.Background(), n))
	return full
}

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }

// Two layouts as nodeprobe finds them: GKE's driver directory, and Debian's files.
func gkeFinding() *driver.Finding {
	return finding(
		accelerator.Volume{Name: "nvidia-lib-libcuda-so-1", HostPath: "/home/kubernetes/bin/nvidia/lib64/libcuda.so.1", MountPath: "/usr/lib64/libcuda.so.1"},
		accelerator.Volume{Name: "nvidia-bin-nvidia-smi", HostPath: "/home/kubernetes/bin/nvidia/bin/nvidia-smi", MountPath: "/usr/bin/nvidia-smi"})
}

func debianFinding() *driver.Finding {
	return finding(
		accelerator.Volume{Name: "nvidia-lib-libcuda-so-1", HostPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", MountPath: "/usr/lib64/libcuda.so.1"},
		accelerator.Volume{Name: "nvidia-bin-nvidia-smi", HostPath: "/usr/bin/nvidia-smi", MountPath: "/usr/bin/nvidia-smi"})
}

// toolkitFinding is a node whose runtime gives containers the driver: nothing to mount.
func toolkitFinding() *driver.Finding {
	f := finding()
	f.Runtime = &driver.Runtime{How: "nvidia is containerd's default runtime", Path: "/etc/containerd/config.toml"}
	f.Config.Accelerators[driver.Resource] = accelerator.Accelerator{Runtime: accelerator.RuntimeNVIDIA}
	return f
}

func finding(vols ...accelerator.Volume) *driver.Finding {
	acc := accelerator.Accelerator{Volumes: vols}
	f := &driver.Finding{
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4",
		GPUs:   []driver.GPU{{Index: 0, Name: "NVIDIA A100-SXM4-40GB"}, {Index: 1, Name: "NVIDIA A100-SXM4-40GB"}},
		Config: accelerator.Config{Accelerators: map[string]accelerator.Accelerator{driver.Resource: acc}},
	}
	for _, v := range vols {
		f.Libraries = append(f.Libraries, driver.File{Name: v.Name, Path: v.HostPath})
	}
	return f
}

func gpu(node string, f *driver.Finding) Report { return Report{Node: node, Finding: f} }

func noGPU(node string) Report {
	return Report{Node: node, NoGPUReason: "no NVIDIA driver found on this node; looked in: /etc/ld.so.cache"}
}

func publish(t *testing.T, p *Publisher, r Report) {
	t.Helper()
	must(t, p.Publish(context.Background(), r))
}

// configMap reads the ConfigMap; nil when there is none.
func configMap(t *testing.T, p *Publisher) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, &cm)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	return &cm
}

// published is the operator's view: accelerators.yaml parsed as the operator parses it.
func published(t *testing.T, p *Publisher) *accelerator.Config {
	t.Helper()
	cm := configMap(t, p)
	if cm == nil {
		t.Fatal("no ConfigMap")
	}
	c, err := accelerator.Parse([]byte(cm.Data[KeyConfig]))
	if err != nil {
		t.Fatalf("the operator refuses %s: %v\n%s", KeyConfig, err, cm.Data[KeyConfig])
	}
	return c
}

// sameConfig checks that got is the layout want as published: each resource also selecting the
// nodes labelled with the layout's ID.
func sameConfig(t *testing.T, got *accelerator.Config, want accelerator.Config) {
	t.Helper()
	layout := accelerator.Config{Accelerators: map[string]accelerator.Accelerator{}}
	for _, res := range managedResources {
		if a, ok := want.Accelerators[res]; ok {
			layout.Accelerators[res] = a
		}
	}
	id := LayoutID(layout)
	selecting := accelerator.Config{Accelerators: maps.Clone(want.Accelerators)}
	for res, a := range layout.Accelerators {
		a.NodeSelector = map[string]string{accelerator.LayoutLabel: id}
		selecting.Accelerators[res] = a
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(selecting)
	if string(g) != string(w) {
		t.Errorf("published config:\n%s\nwant\n%s", g, w)
	}
}

func summary(t *testing.T, node string) (NodeSummary, *corev1.Node) {
	t.Helper()
	var n corev1.Node
	must(t, k8s.Get(context.Background(), types.NamespacedName{Name: node}, &n))
	var s NodeSummary
	if v, ok := n.Annotations[accelerator.NodeAnnotation]; !ok {
		t.Fatalf("node %s has no %s annotation", node, accelerator.NodeAnnotation)
	} else if err := json.Unmarshal([]byte(v), &s); err != nil {
		t.Fatalf("annotation %q: %v", v, err)
	}
	return s, &n
}

// events lists the reasons of the events about the ConfigMap, oldest first.
func events(t *testing.T, p *Publisher) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(p.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == p.Name {
			out = append(out, e)
		}
	}
	return out
}

func reasons(evs []eventsv1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	jobtest.Eventually(t, what, cond)
}
