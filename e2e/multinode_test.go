//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/accelerator"
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
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig)
	// Its devctl's environment, set here (a test that runs beside others cannot t.Setenv), and
	// extra variables for one command.
	devctlEnv := func(extra []string, args ...string) (string, time.Duration, error) {
		var out bytes.Buffer
		cmd := exec.Command(devctl, args...)
		cmd.Env = append(slices.Clone(env), extra...)
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("$ devctl %s  (%.1fs, err=%v)\n%s", strings.Join(args, " "), time.Since(start).Seconds(), err, out.String())
		return out.String(), time.Since(start), err
	}
	devctlMulti := func(args ...string) (string, time.Duration, error) { return devctlEnv(nil, args...) }

	// Its cluster is made from here on, in the background, while the suite's other tests run on
	// theirs (their waits leave most of the cores idle): three nodes take a minute or more, which
	// would otherwise add to the suite's tail beside TestKueue. The PyTorch sample's image is built meanwhile
	// (minutes cold, seconds warm) and loaded into the cluster once it is up (950 MB).
	ddp := startDDPImage(t)
	t.Cleanup(func() {
		if _, _, err := devctlMulti("down", "--name", multi); err != nil {
			t.Errorf("devctl down --name %s: %v", multi, err)
		}
	})
	var up struct {
		out, published string
		took           time.Duration
		err            error
	}
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		// The pull path of the node image: with no --image, up takes kind's published image where
		// Docker has it or can pull it, and here the local registry holds a copy of our node image
		// that the setting names in its place. (The suite's own cluster proves the fallback: kind's
		// image cannot be pulled here, and up builds or finds the offline one.)
		registryInUse.RLock()
		if up.published, up.err = pushNodeImageCopy(); up.err == nil {
			up.out, up.took, up.err = devctlEnv([]string{"MLKUBE_PUBLISHED_NODE_IMAGE=" + up.published}, "up", "--name", multi, "--workers", "2")
		}
		registryInUse.RUnlock()
		ddp.loadInto(multi, up.err, devctlMulti)
	}()
	// Before the cluster's deletion, which the clean-up above does.
	t.Cleanup(func() { <-upDone })

	// Beside TestKueue, once the other tests are done.
	t.Parallel()
	// Misuse says what to do and changes nothing: --workers does not reshape the suite's
	// one-node cluster, and does not go with --config.
	out, _, err := devctlMulti("up", "--name", name, "--workers", "2", "--image", nodeImage)
	if err == nil || !strings.Contains(out, "cluster "+name+" exists with 1 node(s); --workers 2 asks for 3") || !strings.Contains(out, "devctl down --name "+name) {
		t.Errorf("devctl up --workers 2 on the one-node cluster: %v\n%s", err, out)
	}
	out, _, err = devctlMulti("up", "--name", "mlkube-e2e-never", "--workers", "2", "--config", "../clusters/kind.yaml")
	if err == nil || !strings.Contains(out, "--workers and --config both shape the cluster: give one") {
		t.Errorf("devctl up --workers with --config: %v\n%s", err, out)
	}
	<-upDone
	if up.err != nil {
		t.Fatalf("devctl up --workers 2 (in the background): %v", up.err)
	}
	published := up.published
	out = up.out
	timing("devctl up --workers 2: a new cluster of 3 nodes, flannel, operator (beside other tests)", up.took)
	contains(t, "devctl up --workers 2", out, "--workers 2 (1 control plane, 2 workers, flannel)", "mlkube is up on kind cluster "+multi,
		"✓ pulled "+published, "Node image "+published+": standing in for kind's published image, as MLKUBE_PUBLISHED_NODE_IMAGE says (pulled)",
		// The images go to the two workers alone (the control plane is tainted), while kind
		// creates the cluster.
		"into 2 node(s) while the cluster was created",
		// The manifests go in once the apiserver answers, while kind joins the workers.
		"Applied the operator manifests: ", "Applied the nodeprobe manifests: ", ", while the cluster was created")

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

	var workers []string
	for _, n := range nodes.Items {
		if !strings.HasSuffix(n.Name, "control-plane") {
			workers = append(workers, n.Name)
		}
	}
	slices.Sort(workers)
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
	t.Run("a trainer pushed to the local registry, pulled by every worker", func(t *testing.T) { pulledFromRegistry(t, c, workers, devctlMulti) })
	t.Run("GPU nodes that disagree", func(t *testing.T) { gpuNodesThatDisagree(t, c, cs, workers) })
	t.Run("PyTorch DDP", func(t *testing.T) { pytorchDDP(t, c, cs, workers, ddp, devctlMulti) })
}

// pushNodeImageCopy pushes the offline node image to the local registry and returns the copy's
// reference by digest, which Docker does not hold under that name (so it must be pulled).
func pushNodeImageCopy() (string, error) {
	repo := "localhost:5001/mlkube-e2e/kind-node"
	tag := repo + ":" + strings.TrimPrefix(nodeImage[strings.LastIndex(nodeImage, ":"):], ":")
	out, err := exec.Command("sh", "-c", `docker tag "$1" "$2" && docker push "$2"`, "push", nodeImage, tag).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pushing a copy of %s to the local registry: %v\n%s", nodeImage, err, out)
	}
	m := regexp.MustCompile(`digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("docker push of %s printed no digest:\n%s", tag, out)
	}
	if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker rmi %s: %v\n%s", tag, err, out)
	}
	return repo + "@" + m[1], nil
}

// pulledFromRegistry pushes a trainer of the user's to the local registry and runs the distributed
// sample on it: each worker pulls the image from localhost:5001 (the tag is gone from the local
// engine, so devctl run has nothing to load), and the job succeeds.
func pulledFromRegistry(t *testing.T, c client.Client, workers []string, devctlMulti func(...string) (string, time.Duration, error)) {
	ctx := context.Background()
	id := buildOwnImage(t, t.TempDir())
	pushed := "localhost:5001/mlkube-e2e/my-trainer:" + short(id)
	for _, args := range [][]string{{"tag", ownImage, pushed}, {"push", pushed}, {"rmi", pushed}} {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ns := "e2e-nodes-registry"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	data, err := os.ReadFile("../samples/tfjob-distributed.yaml")
	must(t, err)
	text := strings.ReplaceAll(string(data), "image: mlkube/trainer:dev", "image: "+pushed)
	text = strings.ReplaceAll(text, "--step-delay=100ms", "--step-delay=20ms")
	path := filepath.Join(t.TempDir(), "job.yaml")
	must(t, os.WriteFile(path, []byte(text), 0o644))
	out, _, err := devctlMulti("run", path, "-n", ns)
	if err != nil {
		t.Fatalf("devctl run of a job on %s: %v", pushed, err)
	}
	if strings.Contains(out, "Loading images") {
		t.Errorf("devctl run loaded images, where the nodes were to pull them:\n%s", out)
	}
	// The kubelet of each worker says it pulled the image: from the registry, as nothing else has it.
	var events corev1.EventList
	must(t, c.List(ctx, &events, client.InNamespace(ns)))
	pulledOn := map[string]bool{}
	for _, e := range events.Items {
		if e.Reason == "Pulled" && strings.Contains(e.Message, `Successfully pulled image "`+pushed+`"`) {
			pulledOn[e.Source.Host] = true
		}
	}
	for _, w := range workers {
		if !pulledOn[w] {
			t.Errorf("worker %s did not pull %s (pulled on %v)", w, pushed, slices.Sorted(maps.Keys(pulledOn)))
		}
	}
}

// gpuNodesThatDisagree gives each worker the fake driver at another place (Debian's layout on
// one, GKE's on the other) and a fake GPU. nodeprobe on each reports its own layout; the two
// disagree, and that shows as designed: conflicts.yaml in the ConfigMap naming both, a
// DriverLayoutConflict event, one layout published. Each node carries
// its layout's label, the published config selects it, and a GPU job lands on the node whose
// driver is where its mounts say, and finds the driver there.
func gpuNodesThatDisagree(t *testing.T, c client.Client, cs kubernetes.Interface, workers []string) {
	ctx := context.Background()
	driver := buildFakeDriver(t)
	layouts := map[string][2]string{ // node → library and tool folders
		workers[0]: {fakeLibDir, "/usr/bin"},
		workers[1]: {"/home/kubernetes/bin/nvidia/lib64", "/home/kubernetes/bin/nvidia/bin"},
	}
	for _, node := range workers {
		putFakeDriver(t, node, driver, layouts[node][0], layouts[node][1])
		advertiseGPU(t, ctx, c, node)
		// nodeprobe probes every 5 minutes; a new pod probes at once.
		old := nodeprobePod(t, c, node, "")
		must(t, c.Delete(ctx, &old))
	}
	layoutOf := map[string]string{}
	for _, node := range workers {
		eventually(t, time.Minute, "node "+node+" reporting the fake driver", func() error {
			r, err := report(ctx, c, node)
			if err != nil {
				return err
			}
			if !r.GPU || r.DriverVersion != fakeDriverVersion || r.Layout == "" {
				return fmt.Errorf("annotation %+v", r)
			}
			layoutOf[node] = r.Layout
			return nil
		})
	}
	if layoutOf[workers[0]] == layoutOf[workers[1]] {
		t.Fatalf("both nodes report layout %s: the fake drivers are not at different places", layoutOf[workers[0]])
	}
	// One node each: a tie, so the layout published first (by whichever node recorded first)
	// stays; conflicts.yaml says which.
	var want, gpuNode string

	var published *accelerator.Config
	eventually(t, time.Minute, "the conflict recorded and the lower layout published", func() error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, acceleratorsKey, &cm); err != nil {
			return err
		}
		var conflicts struct {
			Nodes     map[string]string `json:"nodes"`
			Published string            `json:"published"`
			Message   string            `json:"message"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["conflicts.yaml"]), &conflicts); err != nil || conflicts.Published == "" {
			return fmt.Errorf("conflicts.yaml %q (%v)", cm.Data["conflicts.yaml"], err)
		}
		if !maps.Equal(conflicts.Nodes, layoutOf) || !strings.Contains(conflicts.Message, "GPU nodes disagree on where the NVIDIA driver is: 2 layouts") {
			return fmt.Errorf("conflicts.yaml:\n%s\nwant nodes %v", cm.Data["conflicts.yaml"], layoutOf)
		}
		want, gpuNode = conflicts.Published, ""
		for node, id := range layoutOf {
			if id == want {
				gpuNode = node
			}
		}
		if gpuNode == "" {
			return fmt.Errorf("conflicts.yaml publishes %s, which no node reports (%v)", want, layoutOf)
		}
		var err error
		if published, err = accelerator.Parse([]byte(cm.Data["accelerators.yaml"])); err != nil {
			return err
		}
		if sel := published.Accelerators[string(gpuResource)].NodeSelector; sel[accelerator.LayoutLabel] != want {
			return fmt.Errorf("accelerators.yaml selects %v, want %s=%s", sel, accelerator.LayoutLabel, want)
		}
		return nil
	})
	for node, id := range layoutOf {
		var n corev1.Node
		must(t, c.Get(ctx, types.NamespacedName{Name: node}, &n))
		if n.Labels[accelerator.LayoutLabel] != id {
			t.Errorf("node %s: label %s=%q, want %s", node, accelerator.LayoutLabel, n.Labels[accelerator.LayoutLabel], id)
		}
	}
	eventually(t, 30*time.Second, "a DriverLayoutConflict event", func() error {
		var events eventsv1.EventList
		if err := c.List(ctx, &events, client.InNamespace(acceleratorsKey.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "DriverLayoutConflict" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "GPU nodes report 2 driver layouts") {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
	operatorReloads(t, ctx, c, cs)

	ns := "e2e-nodes-gpu"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	job := &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{{
			TfReplicaType: v1beta1.TfReplicaWorker,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "tensorflow", Image: "mlkube/nodeprobe:dev", ImagePullPolicy: corev1.PullIfNotPresent,
				Command:   []string{"/nodeprobe", "detect", "--driver-root", "/"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuResource: resource.MustParse("1")}},
			}}}},
		}}},
	}
	must(t, c.Create(ctx, job))
	var pod corev1.Pod
	eventually(t, 3*time.Minute, "the GPU job's pod to succeed", func() error {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpu-worker-0"}, &pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("pod %s on %q: %s %v", pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.Conditions)
		}
		return nil
	})
	if pod.Spec.NodeName != gpuNode {
		t.Errorf("the GPU pod ran on %s, whose driver layout is %s; the published one (%s) is %s's", pod.Spec.NodeName, layoutOf[pod.Spec.NodeName], want, gpuNode)
	}
	checkDriverMounts(t, pod, published)
	matches(t, "nodeprobe detect in the GPU container", podLog(t, cs, pod, nil),
		`(?m)^Driver:\s+`+regexp.QuoteMeta(fakeDriverVersion)+` \(CUDA 12\.4\)$`, `(?m)^GPUs: 2$`)
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
