//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// devctl up from nothing (TestMain ran it) gives a cluster with the operator Ready and the CRD
// served; real pods run a TfJob to success; a second up changes nothing. (That down leaves
// nothing behind, TestMain checks at the end.)
func TestUp(t *testing.T) {
	ctx := context.Background()
	cold := coldUpTook
	t.Logf("$ devctl up --name %s  (%.1fs, in TestMain)\n%s", name, cold.Seconds(), coldUp)
	// With no --image, the node image is mlkube's own (make e2e built it), never kind's default.
	if want := "Node image " + nodeImage + ": mlkube's offline image"; !strings.Contains(coldUp, want) {
		t.Errorf("cold devctl up with no --image: no %q in its output", want)
	}
	// It took the offline image because kind's published one cannot be pulled here, and said so.
	if want := "not kind's published image kindest/node:v1.34.0@sha256:"; !strings.Contains(coldUp, want) || !strings.Contains(coldUp, "cannot pull it") {
		t.Errorf("cold devctl up with no --image: no %q, and why, in its output", want)
	}
	// A new cluster's images are built and loaded beside kind's work, off the critical path.
	for _, want := range []string{"while the cluster was created", "into 1 node(s) while the cluster was created", "unchanged, while the cluster was created"} {
		if !strings.Contains(coldUp, want) {
			t.Errorf("cold devctl up: no %q in its output: the images were not built or loaded, or the manifests not applied, while kind created the cluster", want)
		}
	}
	c, _ := clusterClient(t)

	var dep appsv1.Deployment
	must(t, c.Get(ctx, types.NamespacedName{Namespace: "mlkube-system", Name: "mlkube-operator"}, &dep))
	if dep.Status.AvailableReplicas < 1 {
		t.Fatalf("operator not available after devctl up: %+v", dep.Status)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	must(t, c.Get(ctx, types.NamespacedName{Name: "tfjobs.mlkube.io"}, &crd))
	if !established(&crd) {
		t.Fatalf("CRD tfjobs.mlkube.io not established: %+v", crd.Status.Conditions)
	}
	operatorPod := onePod(t, c, "mlkube-system", "app.kubernetes.io/name=mlkube-operator")

	t.Run("a TfJob runs real pods to success", func(t *testing.T) {
		// The operator image is the one image the cluster surely has; its binary prints its
		// version and exits 0, which is all a replica has to do to succeed.
		image := dep.Spec.Template.Spec.Containers[0].Image
		job := &v1beta1.TfJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "smoke"},
			Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{{
				TfReplicaType: v1beta1.TfReplicaWorker,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "tensorflow", Image: image, Command: []string{"/mlkube-operator", "--version"},
				}}}},
			}}},
		}
		must(t, c.Create(ctx, job))
		eventually(t, 3*time.Minute, "job succeeded", func() error {
			must(t, c.Get(ctx, client.ObjectKeyFromObject(job), job))
			if job.Status.State != v1beta1.JobStateSucceeded {
				return fmt.Errorf("state %q phase %q conditions %+v", job.Status.State, job.Status.Phase, job.Status.Conditions)
			}
			return nil
		})
		// cleanPodPolicy Running keeps the finished pod; the kubelet turns its phase terminal
		// a little after the container's exit.
		eventually(t, time.Minute, "finished pod kept, Succeeded", func() error {
			var pod corev1.Pod
			if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "smoke-worker-0"}, &pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodSucceeded || pod.Spec.NodeName == "" {
				return fmt.Errorf("pod phase %s on node %q", pod.Status.Phase, pod.Spec.NodeName)
			}
			return nil
		})
	})

	out, warm, err := run(t, "up", "--name", name, "--image", nodeImage)
	if err != nil {
		t.Fatalf("second devctl up: %v", err)
	}
	if again := onePod(t, c, "mlkube-system", "app.kubernetes.io/name=mlkube-operator"); again.UID != operatorPod.UID {
		t.Errorf("a second devctl up replaced the operator pod (%s -> %s); nothing had changed", operatorPod.Name, again.Name)
	}
	for _, want := range []string{"Cluster " + name + " exists", "Images already on the nodes", "0 created, 0 changed", "Operator already running"} {
		if !strings.Contains(out, want) {
			t.Errorf("a second devctl up did more than nothing: no %q in its output", want)
		}
	}
	t.Logf("devctl up: cold %.1fs, warm %.1fs", cold.Seconds(), warm.Seconds())
	t.Run("the local registry", func(t *testing.T) { localRegistry(t, c) })

	timing("devctl up, cold (no cluster)", cold)
	timing("devctl up, warm (nothing changed)", warm)

	// The other tests' jobs share the cluster: status must count those that succeeded, the
	// smoke job among them.
	var jobs v1beta1.TfJobList
	must(t, c.List(ctx, &jobs))
	succeeded := 0
	for _, j := range jobs.Items {
		if j.Status.State == v1beta1.JobStateSucceeded {
			succeeded++
		}
	}
	out, _, err = run(t, "status", "--name", name)
	if err != nil {
		t.Fatalf("devctl status: %v", err)
	}
	// Every kind counted (devctl status ranges over the table of kinds), each label in a column.
	want := []string{regexp.QuoteMeta(name), `(?m)^Nodes +\S+ +Ready `, `(?m)^Operator +Available`, `(?m)^CRDs +established, serving mlkube.io/v1beta1: ` + regexp.QuoteMeta(plurals()) + `$`,
		fmt.Sprintf(`(?m)^TfJobs +.*\b%d Succeeded`, succeeded),
		`(?m)^Registry +localhost:5001: running \(mlkube/registry:v3\.1\.2-[0-9a-f]{12}\), \d+ repositor(y|ies): `,
		// devctl up installs the admission policy, and kind's apiserver takes it (CEL's format
		// library needs 1.31): no type-check warnings either.
		`(?m)^Admission +policy mlkube\.io-jobs enforced: [^;]*; template keys, annotations, extended resources and queue names checked$`}
	for _, k := range v1beta1.Kinds[1:] { // the other kinds' rows, whatever they count
		want = append(want, `(?m)^`+regexp.QuoteMeta(k.Name)+`s +(none|\d+ )`)
	}
	matches(t, "devctl status", out, want...)
}

// plurals lists every kind's resource, as devctl status does: "tfjobs, mxjobs, pytorchjobs".
func plurals() string {
	var out []string
	for _, k := range v1beta1.Kinds {
		out = append(out, k.Plural)
	}
	return strings.Join(out, ", ")
}

// localRegistry: the first up ran the registry and announced it; what is pushed to it outlives
// its container, and an up that finds the container gone starts it again on the same images.
func localRegistry(t *testing.T, c client.Client) {
	ctx := context.Background()
	if !strings.Contains(coldUp, "Registry localhost:5001 ") || !strings.Contains(coldUp, "every node pulls from it") {
		t.Errorf("cold devctl up: no line of the local registry in\n%s", coldUp)
	}
	var cm corev1.ConfigMap
	must(t, c.Get(ctx, types.NamespacedName{Namespace: "kube-public", Name: "local-registry-hosting"}, &cm))
	if !strings.Contains(cm.Data["localRegistryHosting.v1"], `host: "localhost:5001"`) {
		t.Errorf("local-registry-hosting: %v", cm.Data)
	}
	// An image of nothing, under a name no other run uses.
	repo := fmt.Sprintf("localhost:5001/mlkube-e2e/kept-%d", time.Now().UnixNano())
	if out, err := exec.Command("sh", "-c", `tar -cf - --files-from /dev/null | docker import - "$1" && docker push "$1"`, "push", repo+":v1").CombinedOutput(); err != nil {
		t.Fatalf("pushing %s: %v\n%s", repo, err, out)
	}
	registryInUse.Lock()
	defer registryInUse.Unlock()
	if out, err := exec.Command("docker", "rm", "-f", "mlkube-registry").CombinedOutput(); err != nil {
		t.Fatalf("docker rm -f mlkube-registry: %v\n%s", err, out)
	}
	out, _, err := run(t, "up", "--name", name)
	if err != nil {
		t.Fatalf("devctl up with the registry container gone: %v", err)
	}
	contains(t, "devctl up with the registry container gone", out, "Registry localhost:5001 started, holding ")
	catalog, err := exec.Command("curl", "-sf", "http://localhost:5001/v2/_catalog?n=1000").Output()
	if err != nil || !strings.Contains(string(catalog), strings.TrimPrefix(repo, "localhost:5001/")) {
		t.Errorf("after the registry came back, its catalog (%v): %s; want %s in it", err, catalog, repo)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func onePod(t *testing.T, c client.Client, ns, selector string) corev1.Pod {
	t.Helper()
	sel, err := metav1.ParseToLabelSelector(selector)
	must(t, err)
	s, err := metav1.LabelSelectorAsSelector(sel)
	must(t, err)
	var pods corev1.PodList
	must(t, c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: s}))
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		t.Fatalf("%d pods match %s in %s, want 1", len(running), selector, ns)
	}
	return running[0]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
