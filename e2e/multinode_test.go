//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A cluster the shape of a real one: `devctl up --workers 2` makes one control plane and two
// workers networked by flannel, offline. The distributed TfJob and MXJob samples spread their
// replicas over both workers (their topology spread constraint), find each other through
// CoreDNS, train across nodes and succeed. The trainer logs the address each peer's name led
// to; the test checks that those are the peers' pods and that some sit on another node than
// the replica that called them: the traffic crossed nodes.
func TestAcrossNodes(t *testing.T) {
	const multi = "mlkube-e2e-multi"
	// Its own kubeconfig: devctl up makes its cluster the current context, and the other tests
	// run devctl against the suite's cluster through theirs.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	devctlMulti := func(args ...string) (string, time.Duration, error) {
		var out bytes.Buffer
		cmd := exec.Command(devctl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("$ devctl %s  (%.1fs, err=%v)\n%s", strings.Join(args, " "), time.Since(start).Seconds(), err, out.String())
		return out.String(), time.Since(start), err
	}
	t.Cleanup(func() {
		if _, _, err := devctlMulti("down", "--name", multi); err != nil {
			t.Errorf("devctl down --name %s: %v", multi, err)
		}
	})
	out, took, err := devctlMulti("up", "--name", multi, "--workers", "2", "--image", nodeImage)
	if err != nil {
		t.Fatalf("devctl up --workers 2: %v", err)
	}
	timing("devctl up --workers 2: a new cluster of 3 nodes, flannel, operator", took)
	contains(t, "devctl up --workers 2", out, "--workers 2 (1 control plane, 2 workers, flannel)", "mlkube is up on kind cluster "+multi)

	raw, err := kindcluster.NewProvider().KubeConfig(multi, false)
	must(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(raw))
	must(t, err)
	c, err := client.New(cfg, client.Options{Scheme: clusterScheme(t)})
	must(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	ctx := context.Background()

	var nodes corev1.NodeList
	must(t, c.List(ctx, &nodes))
	if len(nodes.Items) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes.Items))
	}
	// Every node Ready, so the pod network runs on each; the workers may trail the control plane.
	eventually(t, 2*time.Minute, "every node Ready", func() error {
		must(t, c.List(ctx, &nodes))
		for _, n := range nodes.Items {
			if !nodeReady(n) {
				return fmt.Errorf("node %s not Ready", n.Name)
			}
		}
		return nil
	})

	for _, sample := range []struct{ file, job string }{
		{"../samples/tfjob-distributed.yaml", "distributed"},
		{"../samples/mxjob-distributed.yaml", "mx-distributed"},
	} {
		t.Run(sample.job, func(t *testing.T) {
			ns := "e2e-nodes-" + sample.job
			must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			// Every pod kept once the job ends, its log with it.
			data, err := os.ReadFile(sample.file)
			must(t, err)
			text := strings.Replace(string(data), "  runPolicy:\n", "  runPolicy:\n    cleanPodPolicy: None\n", 1)
			path := filepath.Join(t.TempDir(), "job.yaml")
			must(t, os.WriteFile(path, []byte(text), 0o644))
			if _, _, err := devctlMulti("run", path, "-n", ns); err != nil {
				t.Fatalf("devctl run %s: %v", sample.file, err)
			}

			var pods corev1.PodList
			must(t, c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: sample.job}))
			nodeOf := map[string]string{} // pod IP → node
			podAt := map[string]string{}  // pod IP → pod
			perNode := map[string]int{}
			for _, p := range pods.Items {
				nodeOf[p.Status.PodIP], podAt[p.Status.PodIP] = p.Spec.NodeName, p.Name
				perNode[p.Spec.NodeName]++
			}
			t.Logf("replicas per node: %v", perNode)
			if len(perNode) < 2 {
				t.Errorf("the replicas ran on %d node(s) (%v), want both workers", len(perNode), perNode)
			}
			for n := range perNode {
				if strings.HasSuffix(n, "control-plane") {
					t.Errorf("a replica ran on the control plane %s, which its spread constraint honours the taint of", n)
				}
			}

			peerLine := regexp.MustCompile(`peer (\S+) \((\S+)\) is at ([0-9.]+):\d+`)
			crossed, seen := 0, 0
			for _, p := range pods.Items {
				for _, m := range peerLine.FindAllStringSubmatch(podLog(t, cs, p, nil), -1) {
					seen++
					ip := m[3]
					peerNode, ok := nodeOf[ip]
					if !ok {
						t.Errorf("%s reached %s (%s) at %s, which is no pod of the job", p.Name, m[1], m[2], ip)
						continue
					}
					if peerNode != p.Spec.NodeName {
						crossed++
						t.Logf("%s on %s reached %s (%s) on %s", p.Name, p.Spec.NodeName, m[1], podAt[ip], peerNode)
					}
				}
			}
			if seen == 0 {
				t.Fatalf("no replica logged the address of a peer")
			}
			if crossed == 0 {
				t.Errorf("of %d connections to peers none crossed nodes", seen)
			}
		})
	}
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
