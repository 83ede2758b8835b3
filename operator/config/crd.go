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

// EachRule calls f with every CEL rule of crd, in every version, and the path of the schema that
// holds it ("v1beta1.spec.replicaSpecs[]"): what tests read to say which rules a CRD states.
func EachRule(crd *apiextensionsv1.CustomResourceDefinition, f func(path string, r apiextensionsv1.ValidationRule)) {
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		for _, r := range s.XValidations {
			f(path, r)
		}
		for name, p := range s.Properties {
			walk(path+"."+name, &p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			walk(path+"{}", s.AdditionalProperties.Schema)
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema != nil {
			walk(v.Name, v.Schema.OpenAPIV3Schema)
		}
	}
}
