// Package manifests installs Kubernetes manifests the way `kubectl apply --server-side -k` would,
// for the little of kustomize our manifests use: it reads kustomization `resources:` lists from a
// file system (the operator's embedded config), applies every object with server-side apply, and
// waits for what it applied to be ready.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kustomization is the one feature of kustomize devctl follows. Reading is strict, so a
// kustomization that starts using patches, images or the like fails loudly here instead of being
// applied without them.
type kustomization struct {
	APIVersion string   `json:"apiVersion,omitempty"`
	Kind       string   `json:"kind,omitempty"`
	Resources  []string `json:"resources"`
}

// Read returns the objects of the kustomization in dir of fsys: every document of every file its
// `resources:` name, following directories into their own kustomizations. The objects come in the
// order they can be applied in: namespaces and CRDs first, workloads last.
func Read(fsys fs.FS, dir string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	if err := readDir(fsys, dir, map[string]bool{}, &objs); err != nil {
		return nil, err
	}
	sort.SliceStable(objs, func(i, j int) bool { return applyRank(objs[i]) < applyRank(objs[j]) })
	return objs, nil
}

func readDir(fsys fs.FS, dir string, seen map[string]bool, objs *[]*unstructured.Unstructured) error {
	if seen[dir] {
		return fmt.Errorf("%s: kustomizations include each other in a loop", dir)
	}
	seen[dir] = true
	file := path.Join(dir, "kustomization.yaml")
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return fmt.Errorf("%s: devctl follows only `resources:` lists: %w", file, err)
	}
	for _, r := range k.Resources {
		p := path.Join(dir, r)
		info, err := fs.Stat(fsys, p)
		if err != nil {
			return fmt.Errorf("%s: resource %s: %w", file, r, err)
		}
		if info.IsDir() {
			err = readDir(fsys, p, seen, objs)
		} else {
			err = readFile(fsys, p, objs)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func readFile(fsys fs.FS, file string, objs *[]*unstructured.Unstructured) error {
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return err
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("%s, document %d: %w", file, n, err)
		}
		if len(obj) == 0 { // only comments
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return fmt.Errorf("%s, document %d: not a Kubernetes object (apiVersion, kind and metadata.name are required)", file, n)
		}
		*objs = append(*objs, u)
	}
}

// applyRank orders kinds so that what an object needs exists before it: its namespace, the CRD
// of its kind, the service account and permissions its pods run with, the config they mount.
func applyRank(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	case "ServiceAccount":
		return 2
	case "ClusterRole", "Role":
		return 3
	case "ClusterRoleBinding", "RoleBinding":
		return 4
	case "ConfigMap", "Secret":
		return 5
	case "Deployment", "DaemonSet", "StatefulSet", "Job":
		return 7
	}
	return 6
}
