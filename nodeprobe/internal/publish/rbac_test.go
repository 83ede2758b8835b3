package publish

import (
	"context"
	"errors"
	"fmt"
	"github.com/mlkube/mlkube/internal/jobtest"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/accelerator"
)

const configDir = "../../config"

// nodeprobe does all its work as its ServiceAccount with nothing but the RBAC in
// nodeprobe/config/rbac: creating the ConfigMap, updating it, recording events, annotating
// nodes. And it can do little else.
func TestNodeprobeNeedsOnlyItsRBAC(t *testing.T) {
	jobtest.NeedControlPlane(t)
	ctx := context.Background()
	applyManifests(t, filepath.Join(configDir, "rbac"))
	names := &Publisher{Namespace: "rbac"} // node names rbac-gpu-a, ...
	a, b, cpu := node(t, names, "gpu-a"), node(t, names, "gpu-b"), node(t, names, "cpu")
	waitForPolicy(t, a)
	var policy admissionv1.ValidatingAdmissionPolicy
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "mlkube-nodeprobe-nodes"}, &policy))
	if tc := policy.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Errorf("the admission policy's expressions do not type-check: %+v", tc.ExpressionWarnings)
	}

	on := func(node string) *Publisher {
		return &Publisher{Client: asNodeprobe(t, node), Namespace: "mlkube-system", Name: "mlkube-accelerators", Log: testLogger(t)}
	}
	publish(t, on(cpu), noGPU(cpu))            // get and patch the node; get the (missing) ConfigMap
	publish(t, on(a), gpu(a, gkeFinding()))    // create it, and an event
	publish(t, on(b), gpu(b, debianFinding())) // update it, and a conflict event
	p := on(b)
	if got := reasons(events(t, p)); !slices.Equal(got, []string{ReasonPublished, ReasonConflict}) {
		t.Errorf("events: %v", got)
	}
	sameConfig(t, published(t, p), gkeFinding().Config)
	if s, _ := summary(t, b); !s.GPU {
		t.Errorf("gpu-b summary: %+v", s)
	}
	// Each GPU node labelled with its layout, which the published config selects; none on the
	// node without a GPU.
	for node, want := range map[string]string{a: LayoutID(gkeFinding().Config), b: LayoutID(debianFinding().Config), cpu: ""} {
		if _, n := summary(t, node); n.Labels[accelerator.LayoutLabel] != want {
			t.Errorf("node %s: label %s=%q, want %q", node, accelerator.LayoutLabel, n.Labels[accelerator.LayoutLabel], want)
		}
	}

	// What it must not be able to do.
	sa := asNodeprobe(t, a)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mlkube-system", Name: "someone-elses"}, Data: map[string]string{"k": "v"}}
	must(t, k8s.Create(ctx, other))
	for what, err := range map[string]error{
		"get another ConfigMap":          sa.Get(ctx, client.ObjectKeyFromObject(other), &corev1.ConfigMap{}),
		"update another ConfigMap":       sa.Update(ctx, other),
		"delete the ConfigMap":           sa.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mlkube-system", Name: "mlkube-accelerators"}}),
		"list ConfigMaps":                sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("mlkube-system")),
		"write ConfigMaps elsewhere":     sa.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}),
		"list nodes":                     sa.List(ctx, &corev1.NodeList{}),
		"delete a node":                  sa.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cpu}}),
		"update a node (replace)":        sa.Update(ctx, nodeObject(t, cpu)),
		"read secrets":                   sa.List(ctx, &corev1.SecretList{}, client.InNamespace("mlkube-system")),
		"read pods in its own namespace": sa.List(ctx, &corev1.PodList{}, client.InNamespace("mlkube-nodeprobe")),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want forbidden", what, err)
		}
	}
	// What RBAC allows but the admission policy refuses.
	for what, tc := range map[string]struct{ node, patch string }{
		"annotate another node":     {b, `{"metadata":{"annotations":{"mlkube.io/gpu-driver":"{}"}}}`},
		"change another annotation": {a, `{"metadata":{"annotations":{"example.com/other":"changed"}}}`},
		"add an annotation":         {a, `{"metadata":{"annotations":{"example.com/new":"x"}}}`},
		"label its node":            {a, `{"metadata":{"labels":{"nvidia.com/gpu.present":"true"}}}`},
		"label another node":        {b, `{"metadata":{"labels":{"mlkube.io/gpu-driver-layout":"0123456789ab"}}}`},
		"cordon its node":           {a, `{"spec":{"unschedulable":true}}`},
		"taint its node":            {a, `{"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}`},
	} {
		err := sa.Patch(ctx, nodeObject(t, tc.node), client.RawPatch(types.MergePatchType, []byte(tc.patch)))
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "nodeprobe may") {
			t.Errorf("%s: %v, want refused by the admission policy", what, err)
		}
	}
}

// asNodeprobe is a client that acts as nodeprobe's pod on node would: its service account, with
// the node name its pod-bound token carries.
func asNodeprobe(t *testing.T, node string) client.Client {
	t.Helper()
	as := rest.CopyConfig(jobtest.Config)
	as.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:mlkube-nodeprobe:nodeprobe",
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	c, err := client.New(as, client.Options{})
	must(t, err)
	return c
}

// waitForPolicy waits until the apiserver enforces the admission policy (it loads policies
// asynchronously): a label patch on node as nodeprobe is refused.
func waitForPolicy(t *testing.T, node string) {
	t.Helper()
	sa := asNodeprobe(t, node)
	eventually(t, "the admission policy in force", func() error {
		err := sa.Patch(context.Background(), nodeObject(t, node), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`)))
		if err == nil {
			// Let through before the policy loaded: undo, try again.
			must(t, k8s.Patch(context.Background(), nodeObject(t, node), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":null}}}`))))
			return fmt.Errorf("a label patch was allowed")
		}
		if !strings.Contains(err.Error(), "nodeprobe may") {
			return err
		}
		return nil
	})
}

func nodeObject(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	must(t, k8s.Get(context.Background(), types.NamespacedName{Name: name}, &n))
	return &n
}

// applyManifests creates the objects of a kustomization's resources (files and directories)
// with strict field validation, so a misspelt field fails here rather than being dropped. The
// namespaces the objects live in are created first; what already exists is left alone.
func applyManifests(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"mlkube-system", "mlkube-nodeprobe"} {
		err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	var objs []*unstructured.Unstructured
	for _, file := range kustomizationFiles(t, dir) {
		f, err := os.Open(file)
		must(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			err := k8s.Create(ctx, obj, client.FieldValidation("Strict"))
			if apierrors.IsAlreadyExists(err) && obj.GetKind() == "Namespace" {
				// Created above; give it the manifest's labels.
				err = k8s.Patch(ctx, obj, client.Merge)
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: %s %s: %v", file, obj.GetKind(), obj.GetName(), err)
			}
			objs = append(objs, obj)
		}
		f.Close()
	}
	return objs
}

// kustomizationFiles lists the files a kustomization's resources name, in order, following
// directories.
func kustomizationFiles(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	must(t, err)
	var k struct {
		Resources []string `json:"resources"`
	}
	must(t, yaml.UnmarshalStrict(data, &k))
	var files []string
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			files = append(files, kustomizationFiles(t, p)...)
			continue
		}
		if !strings.HasSuffix(p, ".yaml") {
			t.Fatalf("%s: resource %s is not a YAML file or a directory", dir, r)
		}
		files = append(files, p)
	}
	return files
}
