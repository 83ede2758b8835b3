package up

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/operator/config"
)

func TestNodeprobeObjects(t *testing.T) {
	objs, err := nodeprobeObjects("mlkube/nodeprobe:0123456789ab", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if kinds[0] != "Namespace" || kinds[len(kinds)-1] != "DaemonSet" {
		t.Errorf("apply order %v: the namespace first, the DaemonSet last", kinds)
	}
	ds := manifests.Find(objs, "DaemonSet", "mlkube-nodeprobe", "nodeprobe")
	if ds == nil {
		t.Fatalf("no DaemonSet among %v", kinds)
	}
	containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] != "mlkube/nodeprobe:0123456789ab" {
		t.Errorf("containers %v, want nodeprobe with the built image", containers)
	}
	if v := ds.GetAnnotations()[cluster.VersionAnnotation]; v != "v1.2.3" {
		t.Errorf("version annotation %q", v)
	}
}

// A second devctl up leaves the accelerator config nodeprobe published alone; a first one
// creates it.
func TestTheLiveAcceleratorConfigIsKept(t *testing.T) {
	objs, err := manifests.Read(config.FS, config.Default)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, kept, err := withoutLiveAcceleratorConfig(ctx, fake.NewClientBuilder().Build(), objs)
	if err != nil || kept || len(got) != len(objs) {
		t.Errorf("no ConfigMap yet: %d of %d objects, kept %v, err %v; want all applied", len(got), len(objs), kept, err)
	}
	live := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mlkube-system", Name: "mlkube-accelerators"},
		Data:       map[string]string{"accelerators.yaml": "accelerators:\n  nvidia.com/gpu: {}\n"},
	}
	got, kept, err = withoutLiveAcceleratorConfig(ctx, fake.NewClientBuilder().WithObjects(live).Build(), objs)
	if err != nil || !kept || len(got) != len(objs)-1 {
		t.Fatalf("ConfigMap there: %d of %d objects, kept %v, err %v; want it left out", len(got), len(objs), kept, err)
	}
	if manifests.Find(got, "ConfigMap", "mlkube-system", "mlkube-accelerators") != nil {
		t.Error("the live ConfigMap would be applied over")
	}
	if manifests.Find(got, "Deployment", "mlkube-system", "mlkube-operator") == nil {
		t.Error("the Deployment was left out too")
	}
}

// With --kueue (or Kueue installed), the operator's container gets --kueue beside its own
// arguments, once however often up runs.
func TestKueueArg(t *testing.T) {
	objs, err := manifests.Read(config.FS, config.Default)
	if err != nil {
		t.Fatal(err)
	}
	d := manifests.Find(objs, "Deployment", cluster.OperatorNamespace, cluster.OperatorDeployment)
	if d == nil {
		t.Fatal("no operator Deployment")
	}
	args := func() []string {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if c := c.(map[string]any); c["name"] == cluster.OperatorContainer {
				a, _, _ := unstructured.NestedStringSlice(c, "args")
				return a
			}
		}
		t.Fatalf("no container %s", cluster.OperatorContainer)
		return nil
	}
	before := args()
	for range 2 {
		if err := addArg(d, cluster.OperatorContainer, "--kueue"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := args(), append(slices.Clone(before), "--kueue"); !slices.Equal(got, want) {
		t.Errorf("args %v, want %v", got, want)
	}
	if err := addArg(d, "nobody", "--kueue"); err == nil {
		t.Error("no error for a container that is not there")
	}
}
