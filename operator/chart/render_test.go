// Package chart_test checks the Helm chart in this directory with Helm's own Go SDK: it lints,
// it renders what the kustomize manifests hold, and each value does what values.yaml says.
package chart_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The release the tests render: the namespace is the kustomize manifests' mlkube-system, so that
// the chart's defaults and those manifests name the same objects.
const (
	releaseName = "mlkube"
	releaseNS   = "mlkube-system"
)

// kubeVersion is the cluster the tests render for. Helm's SDK, outside its own binary, would
// otherwise claim Kubernetes 1.20, which the chart's kubeVersion (>=1.30) refuses.
var kubeVersion = &chartutil.KubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}

var (
	loadOnce sync.Once
	loaded   *chart.Chart
	loadErr  error
)

// theChart is this directory as Helm loads it (.helmignore applied); loaded once, since the
// CRDs make it a few megabytes.
func theChart(t *testing.T) *chart.Chart {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = loader.Load(".") })
	if loadErr != nil {
		t.Fatalf("loading the chart: %v", loadErr)
	}
	return loaded
}

// values parses --set style assignments ("a.b=c") into chart values, as `helm install --set`
// does.
func values(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	return vals
}

// rendered is what an install of the chart would create.
type rendered struct {
	rel *release.Release
	// objs are the templates' objects (without the hooks), in the order Helm installs them.
	objs []*unstructured.Unstructured
	// hooks are the `helm test` hooks' objects.
	hooks []*unstructured.Unstructured
	// crds are the objects of crds/, which Helm creates before everything else.
	crds []*unstructured.Unstructured
}

// install runs `helm install --dry-run=client` (client only: no cluster) with vals, the way
// `helm template` does, and returns the render error, if any, as Helm reports it.
func install(t *testing.T, vals map[string]any) (*rendered, error) {
	t.Helper()
	ch := theChart(t)
	cfg := &action.Configuration{Log: func(format string, v ...any) { t.Logf("helm: "+format, v...) }}
	inst := action.NewInstall(cfg)
	inst.ClientOnly, inst.DryRun, inst.DryRunOption = true, true, "client"
	inst.ReleaseName, inst.Namespace = releaseName, releaseNS
	inst.KubeVersion = kubeVersion
	rel, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	r := &rendered{rel: rel}
	r.objs = parseDocs(t, "the release manifest", rel.Manifest)
	for _, h := range rel.Hooks {
		r.hooks = append(r.hooks, parseDocs(t, h.Path, h.Manifest)...)
	}
	for _, f := range ch.CRDObjects() {
		r.crds = append(r.crds, parseDocs(t, f.Filename, string(f.File.Data))...)
	}
	return r, nil
}

// render is install that must succeed.
func render(t *testing.T, sets ...string) *rendered {
	t.Helper()
	r, err := install(t, values(t, sets...))
	if err != nil {
		t.Fatalf("rendering with %q: %v", sets, err)
	}
	return r
}

// find returns the object of that kind, namespace and name, or nil.
func (r *rendered) find(kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range slices.Concat(r.objs, r.hooks, r.crds) {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// must is find for an object that must be there.
func (r *rendered) must(t *testing.T, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	o := r.find(kind, namespace, name)
	if o == nil {
		t.Fatalf("no %s %s/%s rendered; rendered: %v", kind, namespace, name, keys(r.objs))
	}
	return o
}

// operatorArgs are the operator container's arguments.
func (r *rendered) operatorArgs(t *testing.T) []string {
	t.Helper()
	d := r.must(t, "Deployment", releaseNS, "mlkube-operator")
	ctrs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(ctrs) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(ctrs))
	}
	args, _, err := unstructured.NestedStringSlice(ctrs[0].(map[string]any), "args")
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// key names an object the way the comparisons do.
func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func keys(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, key(o))
	}
	return out
}

// parseDocs decodes every YAML document of a manifest; empty ones (comments only) are skipped.
func parseDocs(t *testing.T, where, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s, document %d: %v\n%s", where, n, err, doc)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// kustomize returns the objects of the kustomization in dir of fsys, following its `resources:`
// into files and directories: the one kustomize feature these manifests use, and all that
// devctl's reader (devctl/internal/manifests, which this package may not import) follows.
func kustomize(t *testing.T, fsys fs.FS, dir string) []*unstructured.Unstructured {
	t.Helper()
	data, err := fs.ReadFile(fsys, path.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		p := path.Join(dir, r)
		info, err := fs.Stat(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			out = append(out, kustomize(t, fsys, p)...)
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parseDocs(t, p, string(bytes.TrimSpace(data)))...)
	}
	return out
}
