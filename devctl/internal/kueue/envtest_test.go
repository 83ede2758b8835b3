package kueue

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// kueueAPI starts a control plane with Kueue's CRDs, as the chart renders them, and no Kueue:
// what the queues' apply and devctl status see of the API.
func kueueAPI(t *testing.T) client.Client {
	t.Helper()
	objs, err := loadChart(t).Objects(settings(), "v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := SplitCRDs(objs)
	var typed []*apiextensionsv1.CustomResourceDefinition
	for _, u := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			t.Fatal(err)
		}
		// No Kueue to convert between versions here: the tests write and read the version
		// stored.
		crd.Spec.Conversion = nil
		typed = append(typed, &crd)
	}
	cfg := controlplane.ForTest(t, func(env *envtest.Environment) {
		env.CRDDirectoryPaths = nil
		env.CRDs = typed
	})
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func whats(results []QueueResult) string {
	var out []string
	for _, r := range results {
		out = append(out, r.String())
	}
	return strings.Join(out, ", ")
}

// The default queues: created, then unchanged; a new quota (other nodes) reaches the
// ClusterQueue; a quota changed by hand is kept, and up says so.
func TestApplyQueues(t *testing.T) {
	c := kueueAPI(t)
	ctx := context.Background()
	small, _ := Quota([]corev1.Node{node("a", "2", "8Gi")}, nil)
	results, err := ApplyQueues(ctx, c, Queues(small))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whats(results), `ResourceFlavor "default-flavor" created, ClusterQueue "mlkube" created, LocalQueue "default" in namespace default created`; got != want {
		t.Errorf("first apply: %s\nwant %s", got, want)
	}
	// Kueue's manager puts its finalizer on the flavor.
	flavor := &unstructured.Unstructured{}
	flavor.SetAPIVersion(APIVersion)
	flavor.SetKind("ResourceFlavor")
	if err := c.Get(ctx, client.ObjectKey{Name: Flavor}, flavor); err != nil {
		t.Fatal(err)
	}
	flavor.SetFinalizers([]string{"kueue.x-k8s.io/resource-in-use"})
	if err := c.Update(ctx, flavor, client.FieldOwner("kueue")); err != nil {
		t.Fatal(err)
	}
	results, err = ApplyQueues(ctx, c, Queues(small))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whats(results), `ResourceFlavor "default-flavor" unchanged, ClusterQueue "mlkube" unchanged, LocalQueue "default" in namespace default unchanged`; got != want {
		t.Errorf("second apply: %s\nwant %s", got, want)
	}
	big, _ := Quota([]corev1.Node{node("a", "2", "8Gi"), node("b", "2", "8Gi")}, nil)
	results, err = ApplyQueues(ctx, c, Queues(big))
	if err != nil {
		t.Fatal(err)
	}
	if results[1].What != "updated" || quotaOf(t, c, corev1.ResourceCPU) != "4" {
		t.Errorf("nodes added: %s, cpu quota %s; want the ClusterQueue updated to 4", whats(results), quotaOf(t, c, corev1.ResourceCPU))
	}

	// kubectl edit clusterqueue mlkube: cpu 3.
	cq := &unstructured.Unstructured{}
	cq.SetAPIVersion(APIVersion)
	cq.SetKind("ClusterQueue")
	if err := c.Get(ctx, client.ObjectKey{Name: ClusterQueue}, cq); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	res := groups[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)
	res[0].(map[string]any)["nominalQuota"] = "3"
	if err := unstructured.SetNestedSlice(cq.Object, groups, "spec", "resourceGroups"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, cq, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	results, err = ApplyQueues(ctx, c, Queues(big))
	if err != nil {
		t.Fatal(err)
	}
	if results[1].What != "kept as changed by hand" || !strings.Contains(results[1].Conflict, "kubectl-edit") || quotaOf(t, c, corev1.ResourceCPU) != "3" {
		t.Errorf("after kubectl edit: %s (%s), cpu quota %s; want the edit kept, naming kubectl-edit", whats(results), results[1].Conflict, quotaOf(t, c, corev1.ResourceCPU))
	}
	t.Logf("what up says: %s: %s", Describe(results[1].Object), results[1].Conflict)
	if results[0].What != "unchanged" || results[2].What != "unchanged" {
		t.Errorf("the flavor and the LocalQueue: %s", whats(results))
	}
}

// quotaOf is the ClusterQueue's nominal quota of r.
func quotaOf(t *testing.T, c client.Client, r corev1.ResourceName) string {
	t.Helper()
	cq := &unstructured.Unstructured{}
	cq.SetAPIVersion(APIVersion)
	cq.SetKind("ClusterQueue")
	if err := c.Get(context.Background(), client.ObjectKey{Name: ClusterQueue}, cq); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, res := range groups[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any) {
		if res := res.(map[string]any); res["name"] == string(r) {
			q := resource.MustParse(res["nominalQuota"].(string))
			return q.String()
		}
	}
	return ""
}

// devctl status's line: not installed, then Kueue's version, availability and ClusterQueues;
// Installed finds devctl's Kueue only.
func TestStatusLineAndInstalled(t *testing.T) {
	c := kueueAPI(t)
	ctx := context.Background()
	if got := StatusLine(ctx, c); got != "not installed (devctl up --kueue installs it)" {
		t.Errorf("no Kueue: %q", got)
	}
	if v, err := Installed(ctx, c); err != nil || v != "" {
		t.Errorf("no Kueue: Installed %q, %v", v, err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "kueue"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Deployment, Annotations: map[string]string{VersionAnnotation: Version}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "mlkube/kueue:v0"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	quota, _ := Quota([]corev1.Node{node("a", "2", "8Gi")}, nil)
	if _, err := ApplyQueues(ctx, c, Queues(quota)); err != nil {
		t.Fatal(err)
	}
	cq := &unstructured.Unstructured{}
	cq.SetAPIVersion(APIVersion)
	cq.SetKind("ClusterQueue")
	if err := c.Get(ctx, client.ObjectKey{Name: ClusterQueue}, cq); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cq.Object, int64(2), "status", "admittedWorkloads")
	_ = unstructured.SetNestedField(cq.Object, int64(1), "status", "pendingWorkloads")
	_ = unstructured.SetNestedSlice(cq.Object, []any{map[string]any{"name": Flavor, "resources": []any{
		map[string]any{"name": "cpu", "total": "600m", "borrowed": "0"}, map[string]any{"name": "memory", "total": "1Gi", "borrowed": "0"},
	}}}, "status", "flavorsReservation")
	if err := c.Status().Update(ctx, cq); err != nil {
		t.Fatal(err)
	}
	if got, want := StatusLine(ctx, c), Version+", Available, ClusterQueues: mlkube (2 admitted, 1 pending; quota cpu 2, memory 8Gi; in use cpu 600m, memory 1Gi)"; got != want {
		t.Errorf("status line %q, want %q", got, want)
	}
	if v, err := Installed(ctx, c); err != nil || v != Version {
		t.Errorf("Installed %q, %v; want %s", v, err, Version)
	}
}

// Kueue's manager may read and watch every kind of the table, by the RBAC devctl adds to what
// Kueue's chart renders (ManagerRBAC), bound to the chart's own ServiceAccount; the chart alone
// does not let it, which is why the RBAC is there: asked of a real apiserver's authorizer.
func TestKueueMayReadEveryKind(t *testing.T) {
	ctx := context.Background()
	c := kueueAPI(t)
	objs, err := loadChart(t).Objects(settings(), "v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	var sa string
	apply := func(ours bool) {
		for _, o := range objs {
			switch o.GetKind() {
			case "ServiceAccount":
				if strings.HasSuffix(o.GetName(), "-controller-manager") {
					sa = "system:serviceaccount:" + o.GetNamespace() + ":" + o.GetName()
				}
			case "ClusterRole", "ClusterRoleBinding":
				if (o.GetName() == ManagerRBACName) != ours {
					continue
				}
				if err := c.Create(ctx, o.DeepCopy()); err != nil {
					t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		}
	}
	may := func(verb, resource string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: v1beta1.GroupVersion.Group, Resource: resource, Verb: verb},
		}}
		if err := c.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		return review.Status.Allowed
	}
	apply(false)
	if sa == "" {
		t.Fatal("the chart renders no ServiceAccount for Kueue's manager")
	}
	if may("list", v1beta1.Kinds[0].Plural) {
		t.Errorf("Kueue's chart alone lets %s list %s: ManagerRBAC is needed no more", sa, v1beta1.Kinds[0].Plural)
	}
	apply(true)
	// The apiserver's authorizer learns of new roles and bindings through its own watch: a review
	// right after their create may not see them yet (a CI run saw "may not get tfjobs" once).
	// Allowed within 10 s is allowed.
	mayEventually := func(verb, resource string) bool {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if may(verb, resource) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}
	for _, k := range v1beta1.Kinds {
		for _, verb := range []string{"get", "list", "watch"} {
			if !mayEventually(verb, k.Plural) {
				t.Errorf("%s may not %s %s", sa, verb, k.Plural)
			}
		}
	}
}
