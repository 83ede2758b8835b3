package publish

import (
	"context"
	"github.com/mlkube/mlkube/internal/jobtest"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The DaemonSet's manifests apply cleanly, agree with each other, and its pod is admitted where
// it runs; the same pod would be refused under baseline and in the operator's restricted
// namespace, for its hostPath alone, which is why nodeprobe has a privileged namespace of its own.
func TestDaemonSetManifests(t *testing.T) {
	jobtest.NeedControlPlane(t)
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

	// Why nodeprobe's namespace is privileged: baseline and restricted (mlkube-system's level)
	// both refuse the pod, for its read-only hostPath of the host's root and for nothing else.
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "operator", "config", "manager", "namespace.yaml"))
	must(t, err)
	var opNS corev1.Namespace
	must(t, yaml.Unmarshal(data, &opNS))
	restricted := podSecurityNamespace(t, opNS.Labels)
	for level, tc := range map[string]struct{ ns, why string }{
		"baseline": {podSecurityNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}),
			`hostPath volumes (volume "host")`},
		"restricted": {restricted, `restricted volume types (volume "host" uses restricted volume type "hostPath")`},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, GenerateName: "nodeprobe-"}, Spec: spec}
		err := k8s.Create(ctx, pod, client.DryRunAll)
		// The whole list of violations: any other would be listed here too.
		want := `violates PodSecurity "` + level + `:latest": ` + tc.why
		if !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("under %s: %v, want refused with only %q", level, err, want)
		}
	}
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: restricted, GenerateName: "nodeprobe-"}, Spec: *spec.DeepCopy()}
	withoutHostPaths(&pod.Spec)
	if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Errorf("without its hostPath volumes, under restricted (%v): %v", opNS.Labels, err)
	}
}

// podSecurityNamespace is a new namespace with labels, the Pod Security policy pinned to the
// newest version (as an unlabelled version would be), and nodeprobe's ServiceAccount, without
// which the ServiceAccount admission plugin refuses its pod before Pod Security looks.
func podSecurityNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	name := setup(t).Namespace
	var ns corev1.Namespace
	must(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &ns))
	ns.Labels = maps.Clone(labels)
	ns.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	must(t, k8s.Update(ctx, &ns))
	must(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "nodeprobe"}}))
	return name
}

// withoutHostPaths removes the hostPath volumes and every mount of them.
func withoutHostPaths(spec *corev1.PodSpec) {
	var removed []string
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		if v.HostPath != nil {
			removed = append(removed, v.Name)
		}
		return v.HostPath != nil
	})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return slices.Contains(removed, m.Name) })
	}
}
