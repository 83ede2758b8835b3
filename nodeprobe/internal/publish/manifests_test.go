package publish

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The DaemonSet's manifests apply cleanly, agree with each other, and its pod is admitted where
// it runs; the same pod would be refused in the operator's restricted namespace, which is why
// nodeprobe has its own.
func TestDaemonSetManifests(t *testing.T) {
	if noControlPlane != nil {
		t.Skip(noControlPlane)
	}
	ctx := context.Background()
	objs := applyManifests(t, configDir)
	var ds appsv1.DaemonSet
	var role rbacv1.Role
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds))
		case "Role":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role))
		}
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"publish", "--namespace=" + role.Namespace, "--configmap=" + role.Rules[0].ResourceNames[0], "--node=$(NODE_NAME)", "--driver-root=/host"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if c.Image != "mlkube/nodeprobe:dev" || spec.ServiceAccountName != "nodeprobe" || ds.Namespace != "mlkube-nodeprobe" {
		t.Errorf("image %s, service account %s, namespace %s", c.Image, spec.ServiceAccountName, ds.Namespace)
	}
	sc := c.SecurityContext
	if *spec.SecurityContext.RunAsNonRoot != true || *sc.Privileged || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("security context: pod %+v container %+v", spec.SecurityContext, sc)
	}
	if m := c.VolumeMounts[0]; m.MountPath != "/host" || !m.ReadOnly || spec.Volumes[0].HostPath.Path != "/" {
		t.Errorf("host root mount: %+v %+v", m, spec.Volumes[0])
	}
	if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == "nvidia.com/gpu" && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("tolerations: %+v", spec.Tolerations)
	}

	// Pod Security admission: the DaemonSet controller would create this pod on each node.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, GenerateName: "nodeprobe-"}, Spec: spec}
	pod.Spec.NodeName = "some-node"
	must(t, k8s.Create(ctx, pod))

	// The operator's namespace enforces restricted: there the pod is refused for its hostPath.
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "operator", "config", "manager", "namespace.yaml"))
	must(t, err)
	var opNS corev1.Namespace
	must(t, yaml.Unmarshal(data, &opNS))
	restricted := setup(t).Namespace
	var ns corev1.Namespace
	must(t, k8s.Get(ctx, client.ObjectKey{Name: restricted}, &ns))
	ns.Labels = opNS.Labels
	must(t, k8s.Update(ctx, &ns))
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: restricted, GenerateName: "nodeprobe-"}, Spec: spec}
	if err := k8s.Create(ctx, pod); err == nil || !strings.Contains(err.Error(), "hostPath") {
		t.Errorf("in a namespace labelled like mlkube-system (%v): %v, want refused for hostPath", opNS.Labels, err)
	}
}
