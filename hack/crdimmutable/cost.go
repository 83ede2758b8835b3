package main

import (
	"encoding/json"
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// CostLimit is the most a rule may cost by the apiserver's estimate, times the number of times
// it can run in one object (for a group's rule, replicaSpecs' maxItems): the apiserver refuses
// a CRD with a rule beyond it (StaticEstimatedCostLimit of
// k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation, whose package would bring
// the apiserver's webhook and tracing modules into go.mod).
const CostLimit = 10_000_000

// Margin is how far below CostLimit a rule stays: estimates differ from one apiserver release
// to the next, and the CRDs are served by several.
const Margin = 2

// estimator estimates the cost of rules on a schema node as the apiserver does.
type estimator struct {
	structural *structuralschema.Structural
	declType   *apiservercel.DeclType
}

func newEstimator(node *apiextensionsv1.JSONSchemaProps) (*estimator, error) {
	var internal apiextensionsinternal.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(node, &internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, fmt.Errorf("not a structural schema: %w", err)
	}
	return &estimator{structural: s, declType: model.SchemaDeclType(s, false)}, nil
}

// schemaOf is a schema node as the apiserver's types hold it.
func schemaOf(node map[string]any) (*apiextensionsv1.JSONSchemaProps, error) {
	data, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	var s apiextensionsv1.JSONSchemaProps
	return &s, json.Unmarshal(data, &s)
}

// cost is the estimated cost of one run of rule, which must compile.
func (e *estimator) cost(rule string) (uint64, error) {
	s := *e.structural
	s.XValidations = apiextensionsv1.ValidationRules{{Rule: rule}}
	results, err := cel.Compile(&s, e.declType, celconfig.PerCallLimit,
		environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), cel.NewExpressionsEnvLoader())
	if err != nil {
		return 0, err
	}
	if err := results[0].Error; err != nil {
		return 0, fmt.Errorf("rule %q: %v", rule, err)
	}
	return results[0].MaxCost, nil
}
