package manifests

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

func TestReadFollowsTheOperatorKustomizations(t *testing.T) {
	objs, err := Read(config.FS, config.Default)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range objs {
		got = append(got, u.GetKind()+" "+u.GetName())
	}
	// One CRD per kind of the table, in the generated kustomization's order (by file name).
	var crds []string
	for _, k := range v1beta1.Kinds {
		crds = append(crds, "CustomResourceDefinition "+k.CRD())
	}
	slices.Sort(crds)
	want := append([]string{"Namespace mlkube-system"}, crds...)
	want = append(want,
		"ServiceAccount mlkube-operator",
		"ClusterRole mlkube-operator",
		"Role mlkube-operator-leader-election",
		"ClusterRoleBinding mlkube-operator",
		"RoleBinding mlkube-operator-leader-election",
		"ConfigMap mlkube-accelerators",
		"ValidatingAdmissionPolicy mlkube.io-jobs",
		"ValidatingAdmissionPolicyBinding mlkube.io-jobs",
		"Service mlkube-progress",
		"Deployment mlkube-operator",
	)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("objects, in apply order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	crd := Find(objs, "CustomResourceDefinition", "", "tfjobs.mlkube.io")
	if versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions"); len(versions) == 0 {
		t.Error("the CRD was read without its versions")
	}
}

func TestSetImageReplacesTheOperatorImage(t *testing.T) {
	objs, err := Read(config.FS, config.Default)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetImage(objs, "mlkube/operator:dev", "mlkube/operator:0123456789ab"); err != nil {
		t.Fatal(err)
	}
	d := Find(objs, "Deployment", "mlkube-system", "mlkube-operator")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] != "mlkube/operator:0123456789ab" {
		t.Errorf("containers after SetImage: %v", containers)
	}

	if err := SetImage(objs, "mlkube/operator:dev", "mlkube/operator:x"); err == nil {
		t.Error("replacing an image no container uses succeeded")
	}
}

func TestReadRejectsWhatItDoesNotFollow(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"patches": {
			"a/kustomization.yaml": {Data: []byte("resources: [cm.yaml]\npatches: [{path: p.yaml}]\n")},
			"a/cm.yaml":            {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")},
		},
		"missing file": {
			"a/kustomization.yaml": {Data: []byte("resources: [nothere.yaml]\n")},
		},
		"loop": {
			"a/kustomization.yaml": {Data: []byte("resources: [../b]\n")},
			"b/kustomization.yaml": {Data: []byte("resources: [../a]\n")},
		},
		"not an object": {
			"a/kustomization.yaml": {Data: []byte("resources: [x.yaml]\n")},
			"a/x.yaml":             {Data: []byte("just: data\n")},
		},
	} {
		if objs, err := Read(fsys, "a"); err == nil {
			t.Errorf("%s: read %d objects, want an error", name, len(objs))
		}
	}
}

func TestReadSkipsCommentOnlyDocuments(t *testing.T) {
	fsys := fstest.MapFS{
		"a/kustomization.yaml": {Data: []byte("# comment\nresources:\n- two.yaml\n")},
		"a/two.yaml": {Data: []byte("# header\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n" +
			"---\n# nothing here\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: two}\n")},
	}
	objs, err := Read(fsys, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "Namespace" || objs[1].GetName() != "one" {
		t.Errorf("got %d objects: %v", len(objs), objs)
	}
}
