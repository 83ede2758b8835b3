package commands

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// devctl version names the operator devctl up installed in the current context's cluster.
func TestVersionNamesTheOperator(t *testing.T) {
	envtest(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster.OperatorNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "op"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.OperatorNamespace, Name: cluster.OperatorDeployment, Annotations: map[string]string{cluster.VersionAnnotation: "v0.9.0-3-gabc1234"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "mlkube/operator:abc"}}},
		}},
	}
	must(t, k8s.Create(ctx, d))
	t.Cleanup(func() { _ = k8s.Delete(ctx, d) })
	var out bytes.Buffer
	must(t, Version(ctx, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "devctl    ") ||
		lines[1] != "operator  v0.9.0-3-gabc1234, image mlkube/operator:abc, 0/0 replicas available (context envtest)" {
		t.Errorf("devctl version printed:\n%s", out.String())
	}
}

// A JOB argument completes with the names of the namespace's jobs of every kind, or of --kind.
func TestJobNamesComplete(t *testing.T) {
	ns := envtest(t)
	ctx := context.Background()
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "x"}}}}
	must(t, k8s.Create(ctx, &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mnist"},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{{TfReplicaType: v1beta1.TfReplicaWorker, Template: tmpl}}}}))
	mx := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mxnet", Image: "x"}}}}
	must(t, k8s.Create(ctx, &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mxnet-a"},
		Spec: v1beta1.MXJobSpec{ReplicaSpecs: []v1beta1.MXReplicaSpec{{MXReplicaType: v1beta1.MXReplicaScheduler, Template: mx}, {MXReplicaType: v1beta1.MXReplicaWorker, Template: mx}}}}))
	if got := JobNames(ctx, ns, "", "m"); !slices.Equal(got, []string{"mnist", "mxnet-a"}) {
		t.Errorf("names starting with m: %v", got)
	}
	if got := JobNames(ctx, ns, "mxjob", ""); !slices.Equal(got, []string{"mxnet-a"}) {
		t.Errorf("MXJob names: %v", got)
	}
	if got := JobNames(ctx, ns, "", "x"); len(got) != 0 {
		t.Errorf("names starting with x: %v", got)
	}
}
