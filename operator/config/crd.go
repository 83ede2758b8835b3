package config

import (
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// CRDFile is the file of FS that holds kind k's CustomResourceDefinition.
func CRDFile(k *v1beta1.Kind) string {
	return "crd/bases/" + v1beta1.GroupVersion.Group + "_" + k.Plural + ".yaml"
}

// CRD is kind k's CustomResourceDefinition as `make generate` wrote it (CRDFile).
func CRD(k *v1beta1.Kind) (*apiextensionsv1.CustomResourceDefinition, error) {
	file := CRDFile(k)
	data, err := fs.ReadFile(FS, file)
	if err != nil {
		return nil, fmt.Errorf("the %s CRD: %w (run make generate)", k.Name, err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("operator/config/%s: %w", file, err)
	}
	if crd.Spec.Names.Kind != k.Name {
		return nil, fmt.Errorf("operator/config/%s is the CRD of %s, not %s", file, crd.Spec.Names.Kind, k.Name)
	}
	return &crd, nil
}
