package config_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// What a kind's CRD accepts, its Go type must decode, or every client's list of that kind fails
// on the one job (v1beta1's unreadable.go). So each kind's schema is walked beside its Go type,
// by reflection: every Go field is in the schema with a matching type and every schema field is
// in the Go type, and every integer has a minimum and a maximum its Go type can hold (the
// apiserver ignores `format: int32`). hack/crdbounds writes those bounds; this holds it to them.
func TestEachCRDMatchesItsGoTypes(t *testing.T) {
	crds := crdsByKind(t)
	for _, k := range v1beta1.Kinds {
		crd, ok := crds[k.Name]
		if !ok {
			t.Errorf("no CRD in crd/bases for kind %s", k.Name)
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != v1beta1.GroupVersion.Version {
				continue
			}
			// Tests and tools name a group's fields by the table: they must be the CRD's.
			group := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicaSpecs"].Items.Schema
			for _, field := range []string{k.TypeField, k.PortField} {
				if _, ok := group.Properties[field]; !ok {
					t.Errorf("%s %s: the table's field %q is not in replicaSpecs", k.Name, v.Name, field)
				}
			}
			// The CRD defaults the port by a marker, which cannot read the table: it must say
			// the table's default port, in its value and in its description.
			port := group.Properties[k.PortField]
			if port.Default == nil || string(port.Default.Raw) != strconv.Itoa(int(k.DefaultPort)) {
				t.Errorf("%s %s: replicaSpecs' %s defaults to %s, the table's DefaultPort is %d", k.Name, v.Name, k.PortField, defaultOf(port), k.DefaultPort)
			}
			if want := fmt.Sprintf("(default %d)", k.DefaultPort); !strings.Contains(port.Description, want) {
				t.Errorf("%s %s: replicaSpecs' %s description does not say %s: %q", k.Name, v.Name, k.PortField, want, port.Description)
			}
			w := &typeWalk{}
			w.root(reflect.TypeOf(k.New()).Elem(), v.Schema.OpenAPIV3Schema)
			for _, p := range w.problems {
				t.Errorf("%s %s: %s", k.Name, v.Name, p)
			}
			t.Logf("%s %s: %d integers checked", k.Name, v.Name, w.integers)
			// A walk that lost its way would find nothing wrong: it must reach the templates.
			if w.integers < 100 {
				t.Errorf("%s %s: only %d integers checked; the walk misses the pod templates", k.Name, v.Name, w.integers)
			}
		}
	}
}

// A Quantity's number needs no bounds: its decoder reads any number JSON can hold, which
// the walk above relies on.
func TestAQuantityDecodesAnyNumber(t *testing.T) {
	for _, n := range []string{"1e+308", "-1e+308", "9223372036854775808", "1e-300"} {
		var q resource.Quantity
		if err := json.Unmarshal([]byte(n), &q); err != nil {
			t.Errorf("a Quantity of %s: %v", n, err)
		}
	}
}

func crdsByKind(t *testing.T) map[string]apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := fs.Glob(config.FS, "crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in crd/bases: %v", err)
	}
	out := map[string]apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		var crd apiextensionsv1.CustomResourceDefinition
		data, err := fs.ReadFile(config.FS, f)
		if err == nil {
			err = yaml.UnmarshalStrict(data, &crd)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[crd.Spec.Names.Kind] = crd
	}
	return out
}

// typeWalk compares a schema with a Go type, collecting what disagrees.
type typeWalk struct {
	problems []string
	integers int
}

var (
	objectMeta  = reflect.TypeFor[metav1.ObjectMeta]()
	timeTypes   = []reflect.Type{reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]()}
	quantity    = reflect.TypeFor[resource.Quantity]()
	intOrString = reflect.TypeFor[intstr.IntOrString]()
	marshaler   = reflect.TypeFor[json.Marshaler]()
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

func (w *typeWalk) problem(path, format string, args ...any) {
	w.problems = append(w.problems, path+": "+fmt.Sprintf(format, args...))
}

// root walks a job type: its own UnmarshalJSON decodes it as the plain struct, and its
// metadata is the apiserver's, which the CRD leaves unspecified.
func (w *typeWalk) root(typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	w.object(typ.Name(), typ, s, func(name string) bool { return name == "metadata" })
}

func (w *typeWalk) walk(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if s == nil {
		w.problem(path, "no schema for Go type %s", typ)
		return
	}
	switch {
	case slices.Contains(timeTypes, typ):
		w.want(path, s, "string")
	case typ == quantity:
		if !s.XIntOrString {
			w.problem(path, "a Quantity without x-kubernetes-int-or-string")
		}
	case typ == intOrString:
		if !s.XIntOrString {
			w.problem(path, "an IntOrString without x-kubernetes-int-or-string")
		}
		w.bounds(path, s, math.MinInt32, math.MaxInt32)
	case typ == objectMeta:
		// Embedded metadata keeps only some fields (generateEmbeddedObjectMeta): each one it
		// has must still be ObjectMeta's.
		w.object(path, typ, s, func(string) bool { return true })
	case reflect.PointerTo(typ).Implements(unmarshaler) || typ.Implements(marshaler):
		w.problem(path, "Go type %s has a JSON form of its own, which this test does not know", typ)
	default:
		w.byKind(path, typ, s)
	}
}

func (w *typeWalk) byKind(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	switch typ.Kind() {
	case reflect.String:
		w.want(path, s, "string")
	case reflect.Bool:
		w.want(path, s, "boolean")
	case reflect.Int32:
		w.want(path, s, "integer")
		w.bounds(path, s, math.MinInt32, math.MaxInt32)
	case reflect.Int64, reflect.Int:
		w.want(path, s, "integer")
		// A float64 bound of 2^63 (math.MaxInt64 rounds to it) is past what an int64 holds.
		w.bounds(path, s, math.MinInt64, math.Nextafter(1<<63, 0))
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			w.want(path, s, "string") // []byte is base64
			return
		}
		if w.want(path, s, "array") && s.Items != nil {
			w.walk(path+"[]", typ.Elem(), s.Items.Schema)
		}
	case reflect.Map:
		if !w.want(path, s, "object") {
			return
		}
		if s.AdditionalProperties == nil {
			w.problem(path, "a map without additionalProperties")
			return
		}
		w.walk(path+"{}", typ.Elem(), s.AdditionalProperties.Schema)
	case reflect.Struct:
		w.object(path, typ, s, func(string) bool { return false })
	default:
		w.problem(path, "Go type %s, which no CRD type stands for here", typ)
	}
}

func (w *typeWalk) want(path string, s *apiextensionsv1.JSONSchemaProps, typ string) bool {
	if s.Type != typ {
		w.problem(path, "schema type %q, want %q", s.Type, typ)
		return false
	}
	return true
}

// bounds requires a minimum and a maximum within [lo, hi].
func (w *typeWalk) bounds(path string, s *apiextensionsv1.JSONSchemaProps, lo, hi float64) {
	w.integers++
	switch {
	case s.Minimum == nil || s.Maximum == nil:
		w.problem(path, "an integer without a minimum and a maximum (minimum %s, maximum %s)", bound(s.Minimum), bound(s.Maximum))
	case *s.Minimum < lo || *s.Maximum > hi:
		w.problem(path, "bounds [%.0f, %.0f] beyond what its Go type holds, [%.0f, %.0f]", *s.Minimum, *s.Maximum, lo, hi)
	}
}

// object compares a struct's JSON fields with the schema's properties both ways; mayLack says
// which Go fields the schema may leave out.
func (w *typeWalk) object(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps, mayLack func(string) bool) {
	if !w.want(path, s, "object") {
		return
	}
	fields := jsonFields(typ)
	for name, ft := range fields {
		if p, ok := s.Properties[name]; ok {
			w.walk(path+"."+name, ft, &p)
		} else if !mayLack(name) {
			w.problem(path, "Go field %q (%s) is not in the schema", name, ft)
		}
	}
	for name := range s.Properties {
		if _, ok := fields[name]; !ok {
			w.problem(path, "schema field %q is no field of Go type %s", name, typ)
		}
	}
}

// jsonFields are the fields encoding/json reads into typ, by name: embedded structs without a
// name of their own are flattened (`json:",inline"`), unexported and "-" fields are none.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-", !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "":
			embedded := f.Type
			if embedded.Kind() == reflect.Pointer {
				embedded = embedded.Elem()
			}
			for n, t := range jsonFields(embedded) {
				out[n] = t
			}
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

func defaultOf(s apiextensionsv1.JSONSchemaProps) string {
	if s.Default == nil {
		return "nothing"
	}
	return string(s.Default.Raw)
}

func bound(f *float64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("%.0f", *f)
}
