//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// How long the distributed sample takes from create to every replica Running through the
// operator (its 5 pods and the job's one headless service), next to the same pods applied
// directly with kubectl: the operator's own share of a job's start. Reported
// (bin/e2e-timings.txt), not asserted.
func TestStartupAgainstPlainPods(t *testing.T) {
	kubectl := os.Getenv("MLKUBE_KUBECTL")
	if kubectl == "" {
		t.Skip("MLKUBE_KUBECTL is unset; make e2e sets it")
	}
	c, _ := clusterClient(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "startup")

	data, err := os.ReadFile(filepath.Join("..", "samples", "tfjob-distributed.yaml"))
	must(t, err)
	var job v1beta1.TfJob
	must(t, yaml.Unmarshal(data, &job))
	job.Namespace = ns
	t0 := time.Now()
	must(t, c.Create(ctx, &job))
	pods := waitRunning(t, c, ns, 5)
	viaOperator := time.Since(t0)

	// The same pods, as the operator made them, without the operator. Each gets a headless
	// service of its own: the older layout, a service per replica, which the operator keeps only
	// for jobs an older operator started; today it makes one headless service per job, which
	// the pods join by their hostname and subdomain.
	var list bytes.Buffer
	for _, p := range pods {
		pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "plain-" + p.Name, Namespace: ns, Labels: map[string]string{"plain": p.Name}},
			Spec:       *p.Spec.DeepCopy()}
		pod.Spec.NodeName = ""
		svc := corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: "plain-" + p.Name, Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"plain": p.Name},
				Ports: []corev1.ServicePort{{Port: 2222}}}}
		for _, obj := range []any{pod, svc} {
			b, err := yaml.Marshal(obj)
			must(t, err)
			list.WriteString("---\n")
			list.Write(b)
		}
	}
	raw, err := kindcluster.NewProvider().KubeConfig(name, false)
	must(t, err)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, os.WriteFile(kc, []byte(raw), 0o600))
	// Stop the job first so both runs have the node to themselves.
	must(t, c.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	eventually(t, 2*time.Minute, "job's pods gone", func() error {
		var pl corev1.PodList
		must(t, c.List(ctx, &pl, client.InNamespace(ns)))
		if len(pl.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pl.Items))
		}
		return nil
	})

	apply := exec.Command(kubectl, "--kubeconfig", kc, "apply", "-f", "-")
	apply.Stdin = &list
	t1 := time.Now()
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	waitRunning(t, c, ns, 5)
	direct := time.Since(t1)

	t.Logf("distributed sample, create to all 5 replicas Running: operator %.1fs, plain pods with kubectl %.1fs", viaOperator.Seconds(), direct.Seconds())
	timing("distributed sample, create to all replicas Running (operator)", viaOperator)
	timing("the same 5 pods and services, kubectl apply to all Running (no operator)", direct)
}

// waitRunning waits until n pods of the namespace run (or ran) and returns them.
func waitRunning(t *testing.T, c client.Client, ns string, n int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	eventually(t, 3*time.Minute, "pods running", func() error {
		var pl corev1.PodList
		if err := c.List(context.Background(), &pl, client.InNamespace(ns)); err != nil {
			return err
		}
		running = running[:0]
		for _, p := range pl.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
				running = append(running, p)
			}
		}
		if len(running) < n {
			return fmt.Errorf("%d of %d running", len(running), n)
		}
		return nil
	})
	return running
}
