package kueue

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueueapi "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// root is the repository, seen from this package's directory.
const root = "../../.."

// The tests' settings: every kind of the table, as up passes them.
func settings() Settings {
	return Settings{Image: "mlkube/kueue:v0.17.0-0123456789ab", PodsReadyTimeout: 40 * time.Second, Kinds: v1beta1.Kinds}
}

// pinned is the version of module that the go.mod at path requires.
func pinned(t *testing.T, path, module string) string {
	t.Helper()
	for _, line := range readLines(t, path) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", path, module)
	return ""
}

// The help names Version; up installs what hack/kueue/go.mod pins; the operator's Kueue
// integration (operator/kueue, Kueue's jobframework) is built on the main module's Kueue. All
// three are one version: the integration talks to the manager the sandbox runs.
func TestOneKueueVersion(t *testing.T) {
	if v := pinned(t, "hack/kueue/go.mod", Module); v != Version {
		t.Errorf("hack/kueue/go.mod pins %s %s, kueue.Version is %s", Module, v, Version)
	}
	if v := pinned(t, "go.mod", Module); v != Version {
		t.Errorf("go.mod (the operator's integration) requires %s %s, the sandbox's Kueue is %s", Module, v, Version)
	}
	if !slices.ContainsFunc(readLines(t, "hack/kueue/go.mod"), func(l string) bool { return l == "tool "+Module+"/cmd/kueue" }) {
		t.Errorf("hack/kueue/go.mod has no tool line for %s/cmd/kueue, which hack/build-kubernetes.sh kueue builds", Module)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

var (
	chartOnce sync.Once
	theChart  *Chart
	chartErr  error
)

// loadChart is Kueue's chart of the pinned version, from the module cache (go mod download
// fetches it where missing), as up finds it.
func loadChart(t *testing.T) *Chart {
	t.Helper()
	chartOnce.Do(func() {
		dir, err := ModuleDir(context.Background(), root, Version)
		if err != nil {
			chartErr = err
			return
		}
		theChart, chartErr = LoadChart(ChartDir(dir))
	})
	if chartErr != nil {
		t.Fatal(chartErr)
	}
	return theChart
}

// decodeConfig reads a manager config as Kueue does, strictly: a key Kueue does not know fails.
func decodeConfig(t *testing.T, text string) *configapi.Configuration {
	t.Helper()
	var cfg configapi.Configuration
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatalf("Kueue would not read the config: %v\n%s", err, text)
	}
	return &cfg
}

// The kinds Kueue learns of are the table's, each as Kind.version.group; the chart's own
// frameworks stay, and waitForPodsReady is on with the timeout given and a backoff.
func TestManagerConfig(t *testing.T) {
	base, err := loadChart(t).DefaultManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ManagerConfig(base, settings())
	if err != nil {
		t.Fatal(err)
	}
	cfg := decodeConfig(t, text)
	var want []string
	for _, k := range v1beta1.Kinds {
		gvk := v1beta1.GroupVersion.WithKind(k.Name)
		want = append(want, gvk.Kind+"."+gvk.Version+"."+gvk.Group)
	}
	if got := cfg.Integrations.ExternalFrameworks; !slices.Equal(got, want) {
		t.Errorf("externalFrameworks %v, want every kind of the table %v", got, want)
	}
	if !slices.Equal(cfg.Integrations.Frameworks, decodeConfig(t, base).Integrations.Frameworks) || !slices.Contains(cfg.Integrations.Frameworks, "batch/job") {
		t.Errorf("frameworks %v: the chart's default ones (batch/job among them) must stay", cfg.Integrations.Frameworks)
	}
	w := cfg.WaitForPodsReady
	if w == nil || w.Timeout.Duration != 40*time.Second {
		t.Fatalf("waitForPodsReady %+v, want a timeout of 40s", w)
	}
	if r := w.RequeuingStrategy; r == nil || r.BackoffBaseSeconds == nil || *r.BackoffBaseSeconds != requeueBaseSeconds ||
		r.BackoffMaxSeconds == nil || *r.BackoffMaxSeconds != requeueMaxSeconds || r.Timestamp == nil || *r.Timestamp != configapi.EvictionTimestamp {
		t.Errorf("requeuingStrategy %+v, want requeuing after an eviction with backoff", r)
	}
	// The rest as the chart has it: its leader election, its webhook port.
	if !*cfg.LeaderElection.LeaderElect || cfg.Webhook.Port == nil || *cfg.Webhook.Port != 9443 {
		t.Errorf("the chart's settings were lost: %s", text)
	}

	// Every kind, even where the config lists some external frameworks already, once each.
	again, err := ManagerConfig(text, settings())
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeConfig(t, again).Integrations.ExternalFrameworks; !slices.Equal(got, want) {
		t.Errorf("configured twice: externalFrameworks %v, want %v", got, want)
	}
	other := "integrations:\n  externalFrameworks: [Foo.v1.example.com]\n"
	text, err = ManagerConfig(other, settings())
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeConfig(t, text).Integrations.ExternalFrameworks; !slices.Equal(got, append([]string{"Foo.v1.example.com"}, want...)) {
		t.Errorf("a config with Foo.v1.example.com: externalFrameworks %v", got)
	}
}

func TestManagerConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		what string
		base string
		s    func(*Settings)
	}{
		{"no kinds", "{}", func(s *Settings) { s.Kinds = nil }},
		{"no timeout", "{}", func(s *Settings) { s.PodsReadyTimeout = 0 }},
		{"integrations not a map", "integrations: [a]", func(*Settings) {}},
		{"not YAML", "a: [", func(*Settings) {}},
	} {
		s := settings()
		tc.s(&s)
		if _, err := ManagerConfig(tc.base, s); err == nil {
			t.Errorf("%s: no error", tc.what)
		}
	}
	s := settings()
	s.Image = "mlkube/kueue"
	if _, err := Values("{}", s); err == nil {
		t.Error("an image without a tag: no error")
	}
}

// The chart renders as devctl applies it: Kueue's namespace on every namespaced object, the
// CRDs first, the manager on the nodes' image (never pulled), the config of ManagerConfig,
// Kueue's own certificates for its webhooks (no cert-manager).
func TestChartObjects(t *testing.T) {
	ch := loadChart(t)
	if ch.AppVersion() != Version {
		t.Errorf("the chart installs %s, not %s", ch.AppVersion(), Version)
	}
	objs, err := ch.Objects(settings(), "v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	crds, rest := SplitCRDs(objs)
	if len(crds) < 5 || !slices.Equal(append(slices.Clone(crds), rest...), objs) {
		t.Errorf("%d CRDs, not all first", len(crds))
	}
	for _, name := range []string{"workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io"} {
		if !slices.ContainsFunc(crds, func(o *unstructured.Unstructured) bool { return o.GetName() == name }) {
			t.Errorf("no CRD %s", name)
		}
	}
	for _, o := range rest {
		if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			t.Errorf("%s %s: cert-manager's, which the chart's default leaves out", o.GetKind(), o.GetName())
		}
		// The visibility server's RoleBinding to read the apiserver's auth config lives in
		// kube-system, as every aggregated API server's does.
		if ns := o.GetNamespace(); ns != "" && ns != Namespace && (ns != "kube-system" || o.GetKind() != "RoleBinding") {
			t.Errorf("%s %s in namespace %s, not %s", o.GetKind(), o.GetName(), ns, Namespace)
		}
	}
	if err := MarkVersion(objs, Version); err != nil {
		t.Fatal(err)
	}
	d := mustFind(t, objs, "Deployment", Deployment)
	if d.GetAnnotations()[VersionAnnotation] != Version {
		t.Errorf("the Deployment's annotations %v lack %s", d.GetAnnotations(), VersionAnnotation)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("containers %v", containers)
	}
	c := containers[0].(map[string]any)
	if c["image"] != settings().Image || c["imagePullPolicy"] != "Never" {
		t.Errorf("image %v, pull policy %v; want %s, never pulled", c["image"], c["imagePullPolicy"], settings().Image)
	}
	if cmd, _, _ := unstructured.NestedStringSlice(c, "command"); !slices.Equal(cmd, []string{"/" + ManagerBinary}) {
		t.Errorf("command %v: the image holds the manager at /%s", cmd, ManagerBinary)
	}
	if cpu, _, _ := unstructured.NestedString(c, "resources", "requests", "cpu"); cpu != managerCPU {
		t.Errorf("cpu request %q, want %s", cpu, managerCPU)
	}
	cm := mustFind(t, objs, "ConfigMap", "kueue-manager-config")
	text, _, _ := unstructured.NestedString(cm.Object, "data", "controller_manager_config.yaml")
	cfg := decodeConfig(t, text)
	if len(cfg.Integrations.ExternalFrameworks) != len(v1beta1.Kinds) || cfg.WaitForPodsReady == nil {
		t.Errorf("the rendered config lacks devctl's settings:\n%s", text)
	}
	if m := cfg.InternalCertManagement; m == nil || m.Enable == nil || !*m.Enable {
		t.Errorf("internalCertManagement %+v: Kueue must make its own webhook certificates", m)
	}
	mustFind(t, objs, "Secret", "kueue-webhook-server-cert")
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if !slices.ContainsFunc(rest, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind }) {
			t.Errorf("no %s", kind)
		}
	}
	if last := rest[len(rest)-1].GetKind(); !strings.HasSuffix(last, "WebhookConfiguration") && last != "APIService" {
		t.Errorf("last object a %s: the webhooks and the APIService, which name the manager's service, go last", last)
	}

	// The same settings render the same objects: a second up has nothing to apply.
	again, err := ch.Objects(settings(), "v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	if err := MarkVersion(again, Version); err != nil {
		t.Fatal(err)
	}
	if len(again) != len(objs) {
		t.Fatalf("%d objects, then %d", len(objs), len(again))
	}
	for i := range objs {
		a, _ := yaml.Marshal(objs[i].Object)
		b, _ := yaml.Marshal(again[i].Object)
		if string(a) != string(b) {
			t.Errorf("%s %s rendered differently the second time", objs[i].GetKind(), objs[i].GetName())
		}
	}
}

func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func node(name, cpu, memory string, edit ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for _, e := range edit {
		e(&n)
	}
	return n
}

func TestQuota(t *testing.T) {
	controlPlane := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	}
	gpus := func(count string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Status.Allocatable[GPU] = resource.MustParse(count) }
	}
	for _, tc := range []struct {
		what  string
		nodes []corev1.Node
		want  string
	}{
		{"one node", []corev1.Node{node("a", "2", "8Gi")}, "cpu 2, memory 8Gi"},
		{"a control plane and two workers: the workers", []corev1.Node{node("cp", "2", "8Gi", controlPlane), node("w1", "2", "4Gi"), node("w2", "1500m", "4Gi")}, "cpu 3500m, memory 8Gi"},
		{"a cordoned node left out", []corev1.Node{node("a", "2", "8Gi"), node("b", "2", "8Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true })}, "cpu 2, memory 8Gi"},
		{"GPUs where nodes have them", []corev1.Node{node("a", "4", "16Gi", gpus("2")), node("b", "4", "16Gi", gpus("1"))}, "cpu 8, memory 32Gi, nvidia.com/gpu 3"},
		{"no GPU when none has any", []corev1.Node{node("a", "4", "16Gi", gpus("0"))}, "cpu 4, memory 16Gi"},
		{"memory in kibibytes, as kubelets report it: in mebibytes, rounded down", []corev1.Node{node("a", "2", "8025424Ki"), node("b", "2", "8025424Ki")}, "cpu 4, memory 15674Mi"},
		{"no node", nil, "cpu 0, memory 0"},
	} {
		if got, _ := Quota(tc.nodes, nil); DescribeQuota(got) != tc.want {
			t.Errorf("%s: quota %s, want %s", tc.what, DescribeQuota(got), tc.want)
		}
	}
}

// The quota is what the nodes can still run: the requests of the pods outside Kueue (the
// cluster's own, any not admitted by Kueue) come off their node's allocatable; Kueue's own
// admitted pods, finished pods, pods on a node left out and pods not yet scheduled do not.
func TestQuotaLeavesOutWhatPodsOutsideKueueRequest(t *testing.T) {
	cp := node("cp", "2", "8Gi", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	})
	pod := func(node, cpu string, edit ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
		for _, e := range edit {
			e(&p)
		}
		return p
	}
	admitted := func(p *corev1.Pod) { p.Labels = map[string]string{PodSetLabel: "master"} }
	done := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	initBig := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("700m")}}}}
	}
	sidecar := func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	}
	nodes := []corev1.Node{cp, node("w", "2", "8Gi")}
	pods := []corev1.Pod{
		pod("cp", "500m"),          // on the control plane, left out with it
		pod("w", "100m"),           // coredns-like: taken
		pod("w", "200m", initBig),  // an init container of 700m: 700m taken
		pod("w", "150m", sidecar),  // a sidecar beside: 250m taken
		pod("w", "400m", admitted), // Kueue's own: the quota holds it
		pod("w", "300m", done),     // finished: holds nothing
		pod("", "900m"),            // not scheduled yet: holds no node
	}
	quota, taken := Quota(nodes, pods)
	if got, want := DescribeQuota(quota), "cpu 950m, memory 5Gi"; got != want || taken != 3 {
		t.Errorf("quota %s, %d pods taken; want %s, 3", got, taken, want)
	}
	full := []corev1.Pod{pod("w", "1500m"), pod("w", "1"), pod("w", "1")}
	if quota, _ := Quota(nodes, full); DescribeQuota(quota) != "cpu 0, memory 5Gi" {
		t.Errorf("a node asked for more than it has: quota %s, want cpu 0", DescribeQuota(quota))
	}
}

// The default queues as Kueue reads them: the ClusterQueue's one resource group covers the
// quota's resources in the default flavor, for every namespace; the LocalQueue points at it.
func TestQueues(t *testing.T) {
	quota, _ := Quota([]corev1.Node{node("a", "4", "16Gi", func(n *corev1.Node) { n.Status.Allocatable[GPU] = resource.MustParse("1") })}, nil)
	objs := Queues(quota)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
		if o.GetAPIVersion() != APIVersion {
			t.Errorf("%s in %s", o.GetKind(), o.GetAPIVersion())
		}
	}
	if !slices.Equal(kinds, []string{"ResourceFlavor", "ClusterQueue", "LocalQueue"}) {
		t.Fatalf("kinds %v: the flavor, then the ClusterQueue, then the LocalQueue", kinds)
	}
	var flavor kueueapi.ResourceFlavor
	var cq kueueapi.ClusterQueue
	var lq kueueapi.LocalQueue
	for i, into := range []any{&flavor, &cq, &lq} {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[i].Object, into, true); err != nil {
			t.Fatalf("%s: %v", kinds[i], err)
		}
	}
	if flavor.Name != Flavor || len(flavor.Spec.NodeLabels) != 0 {
		t.Errorf("flavor %+v", flavor)
	}
	if cq.Name != ClusterQueue || cq.Spec.NamespaceSelector == nil || len(cq.Spec.NamespaceSelector.MatchLabels)+len(cq.Spec.NamespaceSelector.MatchExpressions) != 0 {
		t.Errorf("ClusterQueue %s, namespaceSelector %v: want %s open to every namespace ({})", cq.Name, cq.Spec.NamespaceSelector, ClusterQueue)
	}
	if len(cq.Spec.ResourceGroups) != 1 || len(cq.Spec.ResourceGroups[0].Flavors) != 1 || cq.Spec.ResourceGroups[0].Flavors[0].Name != Flavor {
		t.Fatalf("resource groups %+v: one group in flavor %s", cq.Spec.ResourceGroups, Flavor)
	}
	g := cq.Spec.ResourceGroups[0]
	if want := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, GPU}; !slices.Equal(g.CoveredResources, want) {
		t.Errorf("covered resources %v, want %v", g.CoveredResources, want)
	}
	for i, r := range g.Flavors[0].Resources {
		if want := quota[r.Name]; r.Name != g.CoveredResources[i] || r.NominalQuota.Cmp(want) != 0 {
			t.Errorf("resource %d: %s %s, want %s %s", i, r.Name, r.NominalQuota.String(), g.CoveredResources[i], want.String())
		}
	}
	if lq.Name != LocalQueue || lq.Namespace != LocalQueueNamespace || string(lq.Spec.ClusterQueue) != ClusterQueue {
		t.Errorf("LocalQueue %s/%s → %s, want %s/%s → %s", lq.Namespace, lq.Name, lq.Spec.ClusterQueue, LocalQueueNamespace, LocalQueue, ClusterQueue)
	}
}
