// Package crdvalidate checks jobs against the operator's own CRDs (operator/config/crd/bases,
// embedded in the operator/config package), in process, the way the apiserver checks a create:
// the same OpenAPI schema validator, list-map rules, embedded-metadata rules and CEL rules
// (x-kubernetes-validations), after the same pruning and defaulting. The CRD stays the one
// statement of what a job may be: devctl reports what the apiserver would say before it sends
// anything, and tests ask the CRD rather than restating its rules.
//
// Each kind's CRD is read, and its CEL programs compiled, once per process, on first use.
package crdvalidate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/operation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// DefaultNamespace stands for the namespace of the request when a job names none: the apiserver
// takes a namespaced object's namespace from the request's path.
const DefaultNamespace = "default"

// generatedSuffix stands for the five random characters the apiserver appends to generateName
// (from its own alphabet), so that the generated name is checked at its true length.
const generatedSuffix = "xxxxx"

// maxGeneratedPrefix is how much of generateName the apiserver keeps (63 less the suffix).
const maxGeneratedPrefix = 58

// crd is one kind's CRD, ready to validate with: what the apiserver builds when it serves it.
type crd struct {
	kind       *v1beta1.Kind
	apiVersion string
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no x-kubernetes-validations
}

var (
	mu   sync.Mutex
	crds = map[*v1beta1.Kind]func() (*crd, error){}
)

// crdOf is the kind's CRD, read and compiled on first use.
func crdOf(k *v1beta1.Kind) (*crd, error) {
	mu.Lock()
	get, ok := crds[k]
	if !ok {
		get = sync.OnceValues(func() (*crd, error) { return load(k) })
		crds[k] = get
	}
	mu.Unlock()
	return get()
}

// load reads the kind's CRD from operator/config and builds what the apiserver builds to serve
// it (customresource_handler.go): the structural schema with its defaults pruned, the OpenAPI
// validator and the CEL validator with every rule compiled.
func load(k *v1beta1.Kind) (*crd, error) {
	def, err := config.CRD(k)
	if err != nil {
		return nil, err
	}
	file := config.CRDFile(k)
	var version *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range def.Spec.Versions {
		if def.Spec.Versions[i].Name == v1beta1.GroupVersion.Version {
			version = &def.Spec.Versions[i]
		}
	}
	if version == nil || version.Schema == nil {
		return nil, fmt.Errorf("operator/config/%s has no schema for %s", file, v1beta1.GroupVersion.Version)
	}
	var internal apiextensionsinternal.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(version.Schema, &internal, nil); err != nil {
		return nil, fmt.Errorf("operator/config/%s: %w", file, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("operator/config/%s: the schema is not structural: %w", file, err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("operator/config/%s: %w", file, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("operator/config/%s: %w", file, err)
	}
	return &crd{
		kind:       k,
		apiVersion: v1beta1.GroupVersion.String(),
		structural: s,
		schema:     validator,
		cel:        cel.NewValidator(celSchema(s, version.Schema.OpenAPIV3Schema), true, celconfig.PerCallLimit),
	}, nil
}

// Load reads and compiles the CRDs of every kind now rather than on first use, and says what
// keeps one from loading.
func Load() error {
	for _, k := range v1beta1.Kinds {
		if _, err := crdOf(k); err != nil {
			return err
		}
	}
	return nil
}

// Bounds are the least and the greatest value the CRD of kind k takes for the integer at path,
// a field as the apiserver names it with [*] for every item of a list:
// "spec.replicaSpecs[*].replicas". A test that goes past a bound asks the CRD for it rather than
// restating it.
func Bounds(k *v1beta1.Kind, path string) (lo, hi int64, err error) {
	c, err := crdOf(k)
	if err != nil {
		return 0, 0, err
	}
	s := c.structural
	for _, part := range strings.Split(path, ".") {
		name, each := strings.CutSuffix(part, "[*]")
		p, ok := s.Properties[name]
		if !ok {
			return 0, 0, fmt.Errorf("the %s CRD has no %s", k.Name, path)
		}
		s = &p
		if each {
			if s.Items == nil {
				return 0, 0, fmt.Errorf("the %s CRD's %s (of %s) is no list", k.Name, name, path)
			}
			s = s.Items
		}
	}
	v := s.ValueValidation
	if s.Type != "integer" || v == nil || v.Minimum == nil || v.Maximum == nil {
		return 0, 0, fmt.Errorf("the %s CRD's %s is no integer with a minimum and a maximum", k.Name, path)
	}
	lo, hi = int64(*v.Minimum), int64(*v.Maximum)
	if v.ExclusiveMinimum {
		lo++
	}
	if v.ExclusiveMaximum {
		hi--
	}
	return lo, hi, nil
}

// Line is one error in one line, the way devctl prints the apiserver's causes: the field,
// then the message without what the field already says (the schema's "<field> in body", the
// placeholder value of a rule on an object), and the value a person wrote at the end:
// "spec.replicaSpecs[1].replicas: should be less than or equal to 10000 (got 10001)". A rule
// on the whole job has no field: its message names it.
func Line(e *field.Error) string {
	path := e.Field
	if path == "<nil>" {
		path = ""
	}
	msg := e.ErrorBody()
	if e.Type == field.ErrorTypeInvalid {
		value := strings.TrimSuffix(strings.TrimPrefix(msg, e.Type.String()+": "), ": "+e.Detail)
		msg = strings.TrimPrefix(e.Detail, path+" in body ")
		switch value {
		case e.Detail, `"object"`, `"array"`, "null", `""`: // none, or a placeholder
		default:
			msg += " (got " + value + ")"
		}
	}
	if path == "" {
		return msg
	}
	return path + ": " + msg
}

// Validate says what the apiserver would refuse in a create of obj (a job of any kind, typed or
// *unstructured.Unstructured): field.Errors with the apiserver's paths and messages, the CRD's
// own for its CEL rules, in the apiserver's order (the schema's own errors, which it gives in
// no set order, sorted by field); nil when it would create it. obj is not
// changed. As in the apiserver, defaults are applied first, status is dropped (a create cannot
// set it), generateName stands for a name of its length, and a job without a namespace is in
// DefaultNamespace, the request's.
func Validate(obj runtime.Object) field.ErrorList {
	return validate(obj, false)
}

// ValidateAll is Validate, but with every CEL rule run, as if what keeps the apiserver from
// running them (a value of the wrong type, unsupported, missing, too long or too many) were
// fixed: all that the apiserver would refuse, in as many tries as it takes. A test asks it
// whether one field is at fault whatever the others hold.
func ValidateAll(obj runtime.Object) field.ErrorList {
	return validate(obj, true)
}

func validate(obj runtime.Object, all bool) field.ErrorList {
	c, u, err := prepare(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return c.validateCreate(u, all)
}

// Default applies the CRD's defaults to obj (a job of any kind), as the apiserver does when it
// reads a job sent to it: replicas, ports, restart policies, runPolicy and the rest.
func Default(obj runtime.Object) error {
	_, u, err := prepare(obj)
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// prepare finds obj's CRD and reads obj as the apiserver reads a request's body: JSON decoded
// into an unstructured object, pruned and defaulted by the CRD's schema.
func prepare(obj runtime.Object) (*crd, *unstructured.Unstructured, error) {
	k := kindOf(obj)
	if k == nil {
		return nil, nil, fmt.Errorf("%T is not a job of any kind mlkube serves", obj)
	}
	c, err := crdOf(k)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(withTypeMeta(data, c)); err != nil {
		return nil, nil, err
	}
	if err := c.decode(u); err != nil {
		return nil, nil, err
	}
	return c, u, nil
}

// kindOf is the kind of a typed job, or of an unstructured one by its kind.
func kindOf(obj runtime.Object) *v1beta1.Kind {
	if k := v1beta1.KindOf(obj); k != nil {
		return k
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && u.GroupVersionKind().Group == v1beta1.GroupVersion.Group {
		for _, k := range v1beta1.Kinds {
			if k.Name == u.GetKind() {
				return k
			}
		}
	}
	return nil
}

// withTypeMeta sets apiVersion and kind in a job's JSON where they are unset, as a client does
// from its scheme (a typed job built in Go often has neither).
func withTypeMeta(data []byte, c *crd) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	set := func(key, value string) {
		if v, ok := m[key]; !ok || string(v) == `""` || string(v) == "null" {
			m[key], _ = json.Marshal(value)
		}
	}
	set("apiVersion", c.apiVersion)
	set("kind", c.kind.Name)
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}

// decode does what the apiserver's decoder for a CRD does to an object it reads
// (unstructuredSchemaCoercer and unstructuredDefaulter): unknown fields pruned, nulls the schema
// does not allow dropped, metadata coerced to ObjectMeta, then the schema's defaults applied.
func (c *crd) decode(u *unstructured.Unstructured) error {
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	meta, hasMeta, err := schemaobjectmeta.GetObjectMeta(u.Object, false)
	if err != nil {
		return err
	}
	structuralpruning.Prune(u.Object, c.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, c.structural)
	if err := schemaobjectmeta.Coerce(nil, u.Object, c.structural, false, false); err != nil {
		return err
	}
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if hasMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, meta); err != nil {
			return err
		}
	}
	structuraldefaulting.Default(u.Object, c.structural)
	return nil
}

// validateCreate is the apiserver's create of a decoded job: the registry's preparation (name
// generated, namespace from the request, status dropped) and validation (rest.BeforeCreate with
// the CRD's strategy).
func (c *crd) validateCreate(u *unstructured.Unstructured, all bool) field.ErrorList {
	if u.GetName() == "" && u.GetGenerateName() != "" {
		prefix := u.GetGenerateName()
		if len(prefix) > maxGeneratedPrefix {
			prefix = prefix[:maxGeneratedPrefix]
		}
		u.SetName(prefix + generatedSuffix)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(DefaultNamespace)
	}
	delete(u.Object, "status") // the CRDs have a status subresource: a create cannot set it
	u.SetGeneration(1)

	errs := c.validate(u, all)
	if len(errs) == 0 {
		// After the strategy's checks, so that its more specific messages come first.
		meta := &metav1.ObjectMeta{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["metadata"].(map[string]any), meta); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("metadata"), u.Object["metadata"], err.Error())}
		}
		errs = metavalidation.ValidateObjectMetaAccessor(meta, true, path.ValidatePathSegmentName, field.NewPath("metadata"))
	}
	return errs
}

// validate is the CRD strategy's Validate (customresource.customResourceStrategy): type and
// object metadata, the OpenAPI schema, embedded resources' metadata, list-type invariants, then
// the CEL rules, which are skipped, with an error saying so, when a value is of the wrong type,
// unsupported, missing, too long or too many (unless all).
func (c *crd) validate(u *unstructured.Unstructured, all bool) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != c.kind.Name {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), "must be "+c.kind.Name))
	}
	if u.GetAPIVersion() != c.apiVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+c.apiVersion))
	}
	if len(errs) > 0 {
		return errs
	}
	meta := &metav1.ObjectMeta{}
	if raw, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, meta); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
		}
	}
	ctx := context.Background()
	errs = append(errs, metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, true,
		metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"), utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))...)
	// The schema validator's errors come in the order of a map's iteration; a stable order
	// reads better and tests well.
	schemaErrs := apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), c.schema)
	slices.SortStableFunc(schemaErrs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	errs = append(errs, schemaErrs...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, c.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, c.structural, u.Object)...)
	if c.cel != nil {
		if blocked := blocking(errs); blocked != nil && !all {
			errs = append(errs, blocked)
		} else {
			celErrs, _ := c.cel.Validate(ctx, nil, c.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	return errs
}

// blocking is the apiserver's error for CEL rules left unchecked: they assume the schema's
// types, enums, required fields and bounds hold (customresource.hasBlockingErr).
func blocking(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}
