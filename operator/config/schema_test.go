package config_test

import (
	"io/fs"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/config"
)

// The apiserver prunes what a CRD's schema does not name. An object in the schema with no
// properties, no additionalProperties and no x-kubernetes-preserve-unknown-fields is emptied on
// every write: whatever a user wrote there (a pod template's labels, once) is dropped with no
// more than a client-side warning. Only the root's metadata may be such an object: the
// apiserver itself keeps it.
func TestCRDSchemaPrunesNothingTheAPIMeansToKeep(t *testing.T) {
	files, err := fs.Glob(config.FS, "crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in crd/bases: %v", err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(config.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			var emptied []string
			walkSchema(v.Schema.OpenAPIV3Schema, "", func(path string, s *apiextensionsv1.JSONSchemaProps) {
				keeps := len(s.Properties) > 0 || s.AdditionalProperties != nil ||
					(s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields) || s.XEmbeddedResource
				if s.Type == "object" && !keeps && path != ".metadata" {
					emptied = append(emptied, path)
				}
			})
			if len(emptied) > 0 {
				t.Errorf("%s %s: objects the apiserver would empty on every write: %s", crd.Name, v.Name, strings.Join(emptied, ", "))
			}
			// The check above must see the fields it guards.
			if !schemaHas(v.Schema.OpenAPIV3Schema, "template", "metadata", "labels") {
				t.Errorf("%s %s: no template.metadata.labels in the schema", crd.Name, v.Name)
			}
		}
	}
}

func walkSchema(s *apiextensionsv1.JSONSchemaProps, path string, visit func(string, *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	visit(path, s)
	for name, p := range s.Properties {
		walkSchema(&p, path+"."+name, visit)
	}
	if s.Items != nil {
		walkSchema(s.Items.Schema, path+"[]", visit)
	}
	if s.AdditionalProperties != nil {
		walkSchema(s.AdditionalProperties.Schema, path+"{}", visit)
	}
}

// schemaHas says whether some path in s ends in the given property names.
func schemaHas(s *apiextensionsv1.JSONSchemaProps, names ...string) bool {
	found := false
	suffix := "." + strings.Join(names, ".")
	walkSchema(s, "", func(path string, _ *apiextensionsv1.JSONSchemaProps) {
		found = found || strings.HasSuffix(strings.ReplaceAll(path, "[]", ""), suffix)
	})
	return found
}
