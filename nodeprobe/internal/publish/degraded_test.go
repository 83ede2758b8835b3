package publish

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
	"github.com/mlkube/mlkube/operator/accelerator"
)

const libDir = "/usr/lib/x86_64-linux-gnu"

// danglingLibcuda is the warning driver.Detect gives for brokenRoot's libcuda.
const danglingLibcuda = libDir + "/libcuda.so.1 -> /opt/gone/libcuda.so.550.54.15: dangling symlink; not used"

// driverRoot is a Debian-like node root with the driver installed beside the C library, so
// that its files are published one by one (4 volumes).
func driverRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, lib := range []string{"libnvidia-ml", "libcuda", "libcudadebugger"} {
		file(t, root, libDir+"/"+lib+".so.550.54.15")
		link(t, root, lib+".so.550.54.15", libDir+"/"+lib+".so.1")
	}
	file(t, root, libDir+"/libc.so.6")
	file(t, root, "/usr/bin/nvidia-smi")
	return root
}

// brokenRoot breaks a driverRoot as an interrupted driver removal could: libcuda.so.1 left
// dangling, and the ld.so.cache garbled.
func brokenRoot(t *testing.T, root string) {
	t.Helper()
	must(t, os.Remove(filepath.Join(root, libDir, "libcuda.so.1")))
	link(t, root, "/opt/gone/libcuda.so.550.54.15", libDir+"/libcuda.so.1")
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc", "ld.so.cache"), []byte("glibc-ld.so.cache1.1\x00garbage"), 0o644))
}

func file(t *testing.T, root, p string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
	must(t, os.WriteFile(filepath.Join(root, p), nil, 0o644))
}

func link(t *testing.T, root, target, p string) {
	t.Helper()
	must(t, os.Symlink(target, filepath.Join(root, p)))
}

// probe is driver.Detect on root with a fake DGX A100 for NVML.
func probe(t *testing.T, root string) *driver.Finding {
	t.Helper()
	f, err := driver.Detect(driver.Options{Root: root, Open: func(string) driver.NVML { return dgxa100.New() }})
	must(t, err)
	return f
}

// A node whose driver breaks after it published a good layout: the broken probe's config lacks
// libcuda, and must replace neither what the ConfigMap holds nor the node's record, for this
// node or a new one; the annotation and one warning event say why.
func TestDegradedProbeNeverReplacesABetterConfig(t *testing.T) {
	p := setup(t)
	a, b := node(t, p, "gpu-a"), node(t, p, "gpu-b")
	root := driverRoot(t)
	good := probe(t, root)
	if good.Degraded() || accelerator.HostPaths(good.Config.Accelerators[driver.Resource]) != 4 {
		t.Fatalf("the intact root: warnings %q, config %+v", good.Warnings, good.Config)
	}
	publish(t, p, gpu(a, good))
	before := configMap(t, p)

	brokenRoot(t, root)
	bad := probe(t, root)
	if !bad.Degraded() || !slices.Contains(bad.Warnings, danglingLibcuda) {
		t.Fatalf("the broken root's warnings: %q", bad.Warnings)
	}
	for range 2 { // the second probe finds the same: nothing new to say
		publish(t, p, gpu(a, bad))
	}
	publish(t, p, gpu(b, bad)) // a node without a record: nor does it outvote anyone

	after := configMap(t, p)
	if after.ResourceVersion != before.ResourceVersion || after.Data[KeyConfig] != before.Data[KeyConfig] {
		t.Errorf("the ConfigMap changed:\n%s\nwas\n%s", after.Data, before.Data)
	}
	for _, n := range []string{a, b} {
		s, _ := summary(t, n)
		if !slices.Contains(s.Warnings, danglingLibcuda) || !strings.Contains(s.NotPublished, "mounts 3 driver files, fewer than the 4 of the published accelerators.yaml") {
			t.Errorf("%s's annotation: warnings %q, notPublished %q", n, s.Warnings, s.NotPublished)
		}
	}
	evs := events(t, p)
	if got := reasons(evs); !slices.Equal(got, []string{ReasonPublished, ReasonDegraded, ReasonDegraded}) {
		t.Fatalf("events: %v, want one %s per node", got, ReasonDegraded)
	}
	if e := evs[1]; e.Type != corev1.EventTypeWarning || e.Related.Name != a ||
		!strings.HasPrefix(e.Note, "not published: ") || !strings.Contains(e.Note, danglingLibcuda) {
		t.Errorf("event: %s %s %q", e.Type, e.Related.Name, e.Note)
	}

	// Repaired: the annotation no longer warns.
	must(t, os.Remove(filepath.Join(root, libDir, "libcuda.so.1")))
	link(t, root, "libcuda.so.550.54.15", libDir+"/libcuda.so.1")
	must(t, os.Remove(filepath.Join(root, "etc", "ld.so.cache")))
	publish(t, p, gpu(a, probe(t, root)))
	if s, _ := summary(t, a); len(s.Warnings) != 0 || s.NotPublished != "" {
		t.Errorf("after the repair: %+v", s)
	}
	if configMap(t, p).Data[KeyConfig] != before.Data[KeyConfig] {
		t.Error("the repaired node changed the config")
	}
}

// Where nothing better is published (here: the operator's shipped, empty config) a degraded
// probe's layout is published, with a warning; a degraded probe that mounts as many or more
// replaces it in turn.
func TestDegradedProbeWithNothingBetterIsPublished(t *testing.T) {
	p := setup(t)
	a := node(t, p, "gpu-a")
	must(t, p.Client.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		Data:       map[string]string{KeyConfig: "accelerators: {}\n"},
	}))
	root := driverRoot(t)
	brokenRoot(t, root)
	bad := probe(t, root)
	publish(t, p, gpu(a, bad))
	sameConfig(t, published(t, p), bad.Config)
	evs := events(t, p)
	if got := reasons(evs); !slices.Equal(got, []string{ReasonPublished, ReasonDegraded}) {
		t.Fatalf("events: %v", got)
	}
	if e := evs[1]; e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "is recorded") || !strings.Contains(e.Note, danglingLibcuda) {
		t.Errorf("event: %s %q", e.Type, e.Note)
	}
	if s, _ := summary(t, a); s.NotPublished != "" || !slices.Contains(s.Warnings, danglingLibcuda) {
		t.Errorf("annotation: %+v", s)
	}

	// libcuda back, the cache still garbled: still degraded, but it mounts more.
	must(t, os.Remove(filepath.Join(root, libDir, "libcuda.so.1")))
	link(t, root, "libcuda.so.550.54.15", libDir+"/libcuda.so.1")
	better := probe(t, root)
	if !better.Degraded() {
		t.Fatal("a garbled ld.so.cache does not make the probe degraded")
	}
	publish(t, p, gpu(a, better))
	sameConfig(t, published(t, p), better.Config)
}
