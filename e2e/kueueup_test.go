//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// What devctl up --kueue installs (devctl/internal/kueue, which e2e may not import).
const (
	kueueVersion    = "v0.17.0"
	kueueAnnotation = "mlkube.io/kueue-version"
)

// kueueUp checks what devctl up --kueue (its output out) left in the suite's cluster: Kueue's
// manager available, the default ResourceFlavor, ClusterQueue (the node's allocatable as its
// quota, open to every namespace) and LocalQueue, and the operator run with --kueue. Then a
// second devctl up --kueue changes nothing, and devctl status has Kueue's line. A few seconds:
// it rides on TestKueue's devctl up --kueue.
func kueueUp(t *testing.T, c client.Client, out string) {
	t.Helper()
	ctx := context.Background()
	var d appsv1.Deployment
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "kueue-system", Name: "kueue-controller-manager"}, &d))
	available := slices.ContainsFunc(d.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
		return c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
	})
	if !available || d.Annotations[kueueAnnotation] != kueueVersion {
		t.Errorf("Kueue's Deployment: available %v, annotations %v; want available, %s %s", available, d.Annotations, kueueAnnotation, kueueVersion)
	}

	var flavor kueue.ResourceFlavor
	must(t, c.Get(ctx, client.ObjectKey{Name: "default-flavor"}, &flavor))
	var cq kueue.ClusterQueue
	must(t, c.Get(ctx, client.ObjectKey{Name: "mlkube"}, &cq))
	var lq kueue.LocalQueue
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &lq))
	if lq.Spec.ClusterQueue != "mlkube" {
		t.Errorf("LocalQueue default/default queues into %q, want mlkube", lq.Spec.ClusterQueue)
	}
	// The suite's one node: the quota is what it can still run, less than its allocatable cpu
	// (kube-system's, the operator's and Kueue's pods request some), and up says so.
	var nodes corev1.NodeList
	must(t, c.List(ctx, &nodes))
	cpu := resource.Quantity{}
	for _, n := range nodes.Items {
		cpu.Add(n.Status.Allocatable[corev1.ResourceCPU])
	}
	if len(cq.Spec.ResourceGroups) != 1 || len(cq.Spec.ResourceGroups[0].Flavors) != 1 || len(cq.Spec.ResourceGroups[0].Flavors[0].Resources) != 2 {
		t.Fatalf("ClusterQueue %s: resource groups %+v, want cpu and memory in one flavor", cq.Name, cq.Spec.ResourceGroups)
	}
	if q := quotaCPU(t, &cq); q.Sign() <= 0 || q.Cmp(cpu) >= 0 {
		t.Errorf("ClusterQueue %s: cpu quota %s, want more than 0 and less than the node's allocatable %s", cq.Name, q.String(), cpu.String())
	}
	matches(t, "devctl up --kueue", out, `quota cpu \S+, memory \S+: what the nodes can run beside the \d+ pods outside Kueue`)
	if cq.Spec.NamespaceSelector == nil {
		t.Errorf("ClusterQueue %s has no namespaceSelector: no namespace may use it", cq.Name)
	}
	var op appsv1.Deployment
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "mlkube-system", Name: "mlkube-operator"}, &op))
	if args := op.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--kueue") {
		t.Errorf("the operator runs with %v, without --kueue", args)
	}
	contains(t, "devctl up --kueue", out, `ClusterQueue "mlkube"`, `ResourceFlavor "default-flavor"`)

	again, _, err := run(t, "up", "--name", name, "--kueue", "--kueue-pods-ready-timeout=40s")
	if err != nil {
		t.Fatalf("a second devctl up --kueue: %v", err)
	}
	matches(t, "a second devctl up --kueue", again,
		`Kueue's image mlkube/kueue:v\S+ already on the nodes`,
		`Applied Kueue v\S+ from its chart .*: 0 created, 0 changed, \d+ unchanged`,
		`Kueue already running`,
		`ClusterQueue "mlkube" unchanged, LocalQueue "default" in namespace default unchanged`)
	status, _, err := run(t, "status", "--name", name)
	if err != nil {
		t.Fatalf("devctl status: %v", err)
	}
	matches(t, "devctl status", status, `(?m)^Kueue +`+regexp.QuoteMeta(kueueVersion)+`, Available, ClusterQueues: .*\bmlkube \(\d+ admitted, \d+ pending; quota cpu \S+, memory \S+; in use cpu \S+`)
}

// quotaCPU is a ClusterQueue's nominal cpu quota in its first flavor.
func quotaCPU(t *testing.T, cq *kueue.ClusterQueue) resource.Quantity {
	t.Helper()
	for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name == corev1.ResourceCPU {
			return r.NominalQuota
		}
	}
	t.Fatalf("ClusterQueue %s has no cpu quota", cq.Name)
	return resource.Quantity{}
}
