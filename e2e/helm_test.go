//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The Helm chart installs into the kind cluster with Helm's own install (its SDK), here in
// one-namespace mode without nodeprobe and the admission policy (devctl's are there already,
// cluster-wide objects of the same names; operator/chart's tests hold the chart's policy to the
// kustomize manifests' one); its helm test
// hook passes; the distributed sample runs to success under the chart's operator; and the
// uninstall leaves the cluster as it was. devctl's operator steps aside meanwhile: two
// operators would both act on the jobs.
func TestHelmChart(t *testing.T) {
	c, _ := clusterClient(t)
	ctx := context.Background()
	scaleDevctlOperator(t, c, 0)
	t.Cleanup(func() { scaleDevctlOperator(t, c, 1) })

	const releaseNS = "mlkube-helm"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}))
	jobNS := newNamespace(t, c, "helm")

	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig := os.Getenv("KUBECONFIG")
	flags.KubeConfig = &kubeconfig
	var cfg action.Configuration
	must(t, cfg.Init(flags, releaseNS, "secret", t.Logf))
	chart, err := loader.Load("../operator/chart")
	must(t, err)

	install := action.NewInstall(&cfg)
	install.ReleaseName, install.Namespace = "mlkube", releaseNS
	install.Wait, install.Timeout = true, 3*time.Minute
	start := time.Now()
	rel, err := install.Run(chart, map[string]any{
		"operator":        map[string]any{"watchNamespace": jobNS},
		"nodeprobe":       map[string]any{"enabled": false},
		"admissionPolicy": map[string]any{"enabled": false},
	})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	timing("helm install (Helm's SDK, --wait): the chart's operator available", time.Since(start))
	t.Cleanup(func() {
		if _, err := action.NewUninstall(&cfg).Run("mlkube"); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("release status %s", rel.Info.Status)
	}

	tests := action.NewReleaseTesting(&cfg)
	tests.Namespace, tests.Timeout = releaseNS, 3*time.Minute
	start = time.Now()
	rel, err = tests.Run("mlkube")
	if err != nil {
		t.Fatalf("helm test: %v", err)
	}
	ran := 0
	for _, h := range rel.Hooks {
		for _, e := range h.Events {
			if e == release.HookTest {
				ran++
				if h.LastRun.Phase != release.HookPhaseSucceeded {
					t.Errorf("helm test hook %s %s: %s", h.Kind, h.Name, h.LastRun.Phase)
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("the chart has no helm test hook")
	}
	timing("helm test: the chart's test hooks passed", time.Since(start))

	r := devctlRun(t, "run", "../samples/tfjob-distributed.yaml", "-n", jobNS)
	if r.code != 0 {
		t.Fatalf("devctl run under the chart's operator exited %d", r.code)
	}
	if job := getJob(t, c, jobNS, "distributed"); job.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("job state %s", job.Status.State)
	}
	var d appsv1.Deployment
	must(t, c.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: "mlkube-operator"}, &d))
	if d.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("the operator that ran the job is not the chart's: labels %v", d.Labels)
	}
}

// scaleDevctlOperator sets the replicas of the operator devctl up installed and waits for them.
func scaleDevctlOperator(t *testing.T, c client.Client, n int32) {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "mlkube-system", Name: "mlkube-operator"}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	must(t, c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, client.RawPatch(types.MergePatchType, []byte(patch))))
	eventually(t, 2*time.Minute, fmt.Sprintf("devctl's operator at %d replicas", n), func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			return err
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		if d.Status.AvailableReplicas != n || len(pods.Items) != int(n) {
			return fmt.Errorf("%d available, %d pods", d.Status.AvailableReplicas, len(pods.Items))
		}
		return nil
	})
}
