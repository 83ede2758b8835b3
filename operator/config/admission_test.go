package config_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/config"
)

// The admission test needs the real apiserver, whose PodSecurity admission plugin is on by
// default; the other tests of this package do not use it.
func TestMain(m *testing.M) { jobtest.Main(m, nil) }

// The operator's pod, as its Deployment's ReplicaSet would create it, is admitted where
// mlkube-system's Pod Security level, restricted, is enforced; the same pod made a little less
// safe is refused there, so the admission is not a namespace that enforces nothing.
func TestOperatorPodIsAdmittedUnderRestricted(t *testing.T) {
	ctx := context.Background()
	ns := jobtest.Namespace(t)
	var opNS corev1.Namespace
	read(t, "manager/namespace.yaml", &opNS)
	if level := opNS.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
		t.Fatalf("mlkube-system enforces %q, want restricted", level)
	}
	var n corev1.Namespace
	jobtest.Must(t, jobtest.Client.Get(ctx, client.ObjectKey{Name: ns}, &n))
	n.Labels = maps.Clone(opNS.Labels)
	n.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	jobtest.Must(t, jobtest.Client.Update(ctx, &n))
	// The ServiceAccount admission plugin refuses a pod whose account is missing.
	jobtest.Must(t, jobtest.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mlkube-operator"}}))

	jobtest.Must(t, jobtest.Client.Create(ctx, operatorPod(t, ns), client.DryRunAll))

	for name, tc := range map[string]struct {
		mutate func(*corev1.PodSpec)
		why    string
	}{
		"privileged": {func(s *corev1.PodSpec) {
			// The API refuses privileged together with allowPrivilegeEscalation false.
			sc := s.Containers[0].SecurityContext
			sc.Privileged, sc.AllowPrivilegeEscalation = ptr.To(true), nil
		}, "privileged (container \"operator\""},
		"may run as root": {func(s *corev1.PodSpec) { s.SecurityContext.RunAsNonRoot = nil },
			"runAsNonRoot != true"},
		"keeps capabilities": {func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Capabilities = nil },
			"unrestricted capabilities"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := operatorPod(t, ns)
			tc.mutate(&pod.Spec)
			err := jobtest.Client.Create(ctx, pod, client.DryRunAll)
			if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), `violates PodSecurity "restricted:latest": `) ||
				!strings.Contains(err.Error(), tc.why) {
				t.Errorf("err = %v, want refused by PodSecurity for %s", err, tc.why)
			}
		})
	}
}

// operatorPod is the pod of the manager Deployment's template, in ns.
func operatorPod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	var d appsv1.Deployment
	read(t, "manager/deployment.yaml", &d)
	tmpl := d.Spec.Template
	if tmpl.Spec.SecurityContext == nil || len(tmpl.Spec.Containers) == 0 || tmpl.Spec.Containers[0].SecurityContext == nil {
		t.Fatalf("the Deployment's pod template lacks a security context: %+v", tmpl.Spec)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: d.Name + "-", Labels: tmpl.Labels},
		Spec:       tmpl.Spec,
	}
}

// read decodes one manifest of FS strictly: a misspelt securityContext field would otherwise
// vanish and the test would admit a pod that is not the one deployed.
func read(t *testing.T, file string, into any) {
	t.Helper()
	data, err := fs.ReadFile(config.FS, file)
	jobtest.Must(t, err)
	jobtest.Must(t, yaml.UnmarshalStrict(data, into))
}
