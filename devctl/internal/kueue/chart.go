package kueue

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Chart is Kueue's Helm chart (charts/kueue of Kueue's module), loaded.
type Chart struct {
	ch *chart.Chart
}

// LoadChart loads the chart in dir.
func LoadChart(dir string) (*Chart, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading Kueue's chart %s: %w", dir, err)
	}
	if ch.Metadata == nil || ch.Metadata.Name != "kueue" {
		return nil, fmt.Errorf("%s is not Kueue's chart", dir)
	}
	return &Chart{ch: ch}, nil
}

// AppVersion is the Kueue version the chart installs (v0.17.0).
func (c *Chart) AppVersion() string { return c.ch.Metadata.AppVersion }

// DefaultManagerConfig is the chart's default manager config, managerConfig.controllerManagerConfigYaml
// of its values.yaml.
func (c *Chart) DefaultManagerConfig() (string, error) {
	v, err := chartutil.Values(c.ch.Values).PathValue("managerConfig.controllerManagerConfigYaml")
	if err != nil {
		return "", fmt.Errorf("Kueue's chart has no default managerConfig.controllerManagerConfigYaml: %w", err)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("Kueue's chart's managerConfig.controllerManagerConfigYaml is a %T, not a string", v)
	}
	return s, nil
}

// Objects renders the chart as devctl installs it, for a cluster of Kubernetes kubeVersion
// (v1.34.4): release Release in namespace Namespace, with the values of Values, and the RBAC
// its manager needs for mlkube's kinds (ManagerRBAC). They come CRDs first, in the order they
// apply in (Sort).
func (c *Chart) Objects(s Settings, kubeVersion string) ([]*unstructured.Unstructured, error) {
	base, err := c.DefaultManagerConfig()
	if err != nil {
		return nil, err
	}
	vals, err := Values(base, s)
	if err != nil {
		return nil, err
	}
	objs, err := c.Render(vals, kubeVersion)
	if err != nil {
		return nil, err
	}
	rbac, err := ManagerRBAC(s.Kinds)
	if err != nil {
		return nil, err
	}
	objs = append(objs, rbac...)
	Sort(objs)
	return objs, nil
}

// Render renders the chart with vals as `helm template` would, as release Release in namespace
// Namespace (which it does not create), and returns its objects in the order they apply in.
func (c *Chart) Render(vals map[string]any, kubeVersion string) ([]*unstructured.Unstructured, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	if kubeVersion != "" {
		major, minor, err := majorMinor(kubeVersion)
		if err != nil {
			return nil, err
		}
		caps.KubeVersion = chartutil.KubeVersion{Version: kubeVersion, Major: major, Minor: minor}
	}
	top, err := chartutil.ToRenderValues(c.ch, vals, chartutil.ReleaseOptions{Name: Release, Namespace: Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("Kueue's chart values: %w", err)
	}
	files, err := engine.Render(c.ch, top)
	if err != nil {
		return nil, fmt.Errorf("rendering Kueue's chart: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range c.ch.CRDObjects() {
		if err := parseDocs(f.Filename, f.File.Data, &objs); err != nil {
			return nil, err
		}
	}
	// In the order of their names, so that the same chart renders the same list.
	names := make([]string, 0, len(files))
	for name := range files {
		if ext := path.Ext(name); ext == ".yaml" || ext == ".yml" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := parseDocs(name, []byte(files[name]), &objs); err != nil {
			return nil, err
		}
	}
	for _, o := range objs {
		if hooks := o.GetAnnotations()["helm.sh/hook"]; hooks != "" {
			return nil, fmt.Errorf("%s %s of Kueue's chart is a Helm hook (%s), which devctl does not run", o.GetKind(), o.GetName(), hooks)
		}
		// The chart puts its webhook configurations in the release's namespace; they have
		// none, and server-side apply wants none.
		if clusterScoped[o.GetKind()] {
			o.SetNamespace("")
		}
	}
	Sort(objs)
	return objs, nil
}

// parseDocs appends the objects of a rendered file, skipping empty documents.
func parseDocs(name string, data []byte, objs *[]*unstructured.Unstructured) error {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("%s, document %d: %w", name, n, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return fmt.Errorf("%s, document %d: not a Kubernetes object", name, n)
		}
		*objs = append(*objs, u)
	}
}

// clusterScoped are the kinds of cluster-wide objects the chart renders.
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true, "APIService": true,
	"PriorityClass": true,
}

// rank orders kinds as Helm installs them, roughly: what an object needs exists before it.
func rank(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	case "ServiceAccount":
		return 2
	case "ClusterRole", "Role":
		return 3
	case "ClusterRoleBinding", "RoleBinding":
		return 4
	case "ConfigMap", "Secret":
		return 5
	case "Deployment", "DaemonSet", "StatefulSet", "Job":
		return 7
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService":
		return 8
	}
	return 6
}

// Sort orders objs as they apply in: namespaces, CRDs, service accounts, RBAC, config, services,
// the Deployment, then the webhook configurations and the APIService, which name its service.
func Sort(objs []*unstructured.Unstructured) {
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
}

// majorMinor splits v1.34.4 into 1 and 34.
func majorMinor(version string) (string, string, error) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", "", fmt.Errorf("Kubernetes version %q is not vMAJOR.MINOR[.PATCH]", version)
	}
	return parts[0], strings.TrimRight(parts[1], "+"), nil
}
