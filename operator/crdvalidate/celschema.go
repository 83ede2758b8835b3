package crdvalidate

import (
	"encoding/json"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// The CEL rules are run against the schema cut down to what they can read (celSchema), not the
// whole one: the apiserver's CEL adaptor copies every property of an object's schema each time a
// rule reads one of its fields (model.Structural.Properties), and a pod template's spec has
// some forty, its containers some thirty. For a TfJob of three groups that was 1 MB allocated
// and two thirds of the time of each check, most of what the operator allocates at scale.
//
// What a rule can read of an object is the fields it names: CEL selects a field by its name
// (self.f, self.?f, has(self.f)) or by a string (self[?'f']), and cannot iterate over an
// object's fields or take its size. So a property stays when its name, or its CEL escape, is
// in the text of any rule, message expression or field path of the CRD (a substring is enough:
// it keeps more than needed, never less), or when a rule lies beneath it; the rest of its
// schema (types, formats, bounds) is kept whole, so every rule compiles and evaluates as it does
// against the whole schema. Two objects compared with == still compare the fields left out,
// as plain values (the adaptor's own fallback for fields it has no schema for); no rule of
// mlkube's compares objects.

// celSchema is s with each object's properties cut to those the CRD's rules can read (see
// above). s is not changed.
func celSchema(s *structuralschema.Structural, crdSchema *apiextensionsv1.JSONSchemaProps) *structuralschema.Structural {
	text := ruleText(crdSchema)
	mentioned := func(name string) bool {
		if strings.Contains(text, name) {
			return true
		}
		escaped, ok := apiservercel.Escape(name)
		return ok && strings.Contains(text, escaped)
	}
	return cutForCEL(s.DeepCopy(), mentioned)
}

func cutForCEL(s *structuralschema.Structural, mentioned func(string) bool) *structuralschema.Structural {
	if s == nil {
		return nil
	}
	for name, p := range s.Properties {
		if !mentioned(name) && !hasRules(&p) {
			delete(s.Properties, name)
			continue
		}
		s.Properties[name] = *cutForCEL(&p, mentioned)
	}
	s.Items = cutForCEL(s.Items, mentioned)
	if s.AdditionalProperties != nil {
		s.AdditionalProperties.Structural = cutForCEL(s.AdditionalProperties.Structural, mentioned)
	}
	return s
}

// hasRules says whether s or anything beneath it carries CEL rules.
func hasRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 || (s.ValueValidation != nil && nestedHasRules(s.ValueValidation)) {
		return true
	}
	for _, p := range s.Properties {
		if hasRules(&p) {
			return true
		}
	}
	return hasRules(s.Items) || (s.AdditionalProperties != nil && hasRules(s.AdditionalProperties.Structural))
}

func nestedHasRules(v *structuralschema.ValueValidation) bool {
	var nested []structuralschema.NestedValueValidation
	nested = append(nested, v.AllOf...)
	nested = append(nested, v.AnyOf...)
	nested = append(nested, v.OneOf...)
	if v.Not != nil {
		nested = append(nested, *v.Not)
	}
	for i := range nested {
		if nestedValueHasRules(&nested[i]) {
			return true
		}
	}
	return false
}

func nestedValueHasRules(n *structuralschema.NestedValueValidation) bool {
	if n == nil {
		return false
	}
	if len(n.XValidations) > 0 || nestedHasRules(&n.ValueValidation) {
		return true
	}
	for _, p := range n.Properties {
		if nestedValueHasRules(&p) {
			return true
		}
	}
	return nestedValueHasRules(n.Items) || nestedValueHasRules(n.AdditionalProperties)
}

// ruleText is the text of every x-kubernetes-validations entry of the schema, wherever it is
// (properties, items, allOf and the rest), one after another: its rule, message, message
// expression and field path.
func ruleText(crdSchema *apiextensionsv1.JSONSchemaProps) string {
	data, err := json.Marshal(crdSchema)
	if err != nil {
		return ""
	}
	var tree any
	if json.Unmarshal(data, &tree) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if k == "x-kubernetes-validations" {
					rules, _ := json.Marshal(sub)
					b.Write(rules)
					b.WriteByte('\n')
					continue
				}
				walk(sub)
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		}
	}
	walk(tree)
	return b.String()
}
