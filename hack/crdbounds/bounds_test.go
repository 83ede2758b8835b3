package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
)

// crd is a CRD whose spec holds the given properties, as controller-gen writes it.
func crd(properties string) []byte { return crdfile.Sample(properties) }

func TestBoundsEveryIntegerByItsFormatAndKeepsTighterOnes(t *testing.T) {
	in := crd(`
free32:
  format: int32
  type: integer
port:
  format: int32
  maximum: 65535
  minimum: 1
  type: integer
loose64:
  exclusiveMaximum: true
  format: int64
  maximum: 9223372036854775807
  type: integer
counts:
  items:
    format: int32
    type: integer
  type: array
byName:
  additionalProperties:
    format: int64
    type: integer
  type: object
probePort:
  anyOf:
  - type: integer
  - type: string
  x-kubernetes-int-or-string: true
memory:
  anyOf:
  - type: integer
  - type: string
  pattern: ` + quantityPattern + `
  x-kubernetes-int-or-string: true
`)
	out, b, err := boundCRD(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]any{
		"free32":    {-2147483648.0, 2147483647.0},
		"port":      {1.0, 65535.0},
		"loose64":   {-float64(MaxInt64AsFloat), float64(MaxInt64AsFloat)},
		"probePort": {-2147483648.0, 2147483647.0},
		"memory":    {nil, nil},
	}
	spec := specOf(t, out)
	for name, w := range want {
		p := spec[name].(map[string]any)
		if p["minimum"] != w[0] || p["maximum"] != w[1] {
			t.Errorf("%s: minimum %v maximum %v, want %v %v", name, p["minimum"], p["maximum"], w[0], w[1])
		}
	}
	if _, ok := spec["loose64"].(map[string]any)["exclusiveMaximum"]; ok {
		t.Error("loose64 kept exclusiveMaximum, which qualified the maximum it replaced")
	}
	items := spec["counts"].(map[string]any)["items"].(map[string]any)
	values := spec["byName"].(map[string]any)["additionalProperties"].(map[string]any)
	if items["maximum"] == nil || values["maximum"] == nil {
		t.Errorf("array items and map values unbounded: %v, %v", items, values)
	}
	// The exact digits matter: a float64 on the way would write 2^63 for the int64 maximum.
	for _, literal := range []string{"maximum: 9223372036854774784", "minimum: -9223372036854774784"} {
		if !strings.Contains(string(out), literal) {
			t.Errorf("output lacks %q", literal)
		}
	}
	if b.bounded != 6 || b.changed != 5 {
		t.Errorf("bounded %d, changed %d; want 6 and 5 (the port was bounded already)", b.bounded, b.changed)
	}
	again, _, err := boundCRD(out)
	if err != nil || string(again) != string(out) {
		t.Errorf("a second run changes its own output (err %v):\n%s", err, again)
	}
}

func TestFailsOnAnIntegerItCannotBound(t *testing.T) {
	for what, props := range map[string]string{
		"a Go int":                         "count:\n  type: integer",
		"an unsigned format":               "count:\n  format: uint64\n  type: integer",
		"an int-or-string of unknown type": "size:\n  anyOf:\n  - type: integer\n  - type: string\n  pattern: ^[0-9]+$\n  x-kubernetes-int-or-string: true",
		"an integer in an anyOf":           "size:\n  anyOf:\n  - type: integer\n  - type: boolean",
	} {
		field, _, _ := strings.Cut(props, ":")
		if _, _, err := boundCRD(crd(props)); err == nil || !strings.Contains(err.Error(), "v1.spec."+field) {
			t.Errorf("%s: err %v, want one naming v1.spec.%s", what, err, field)
		}
	}
}

// Whatever controller-gen wrote stays byte for byte: the diff a bound makes is its two lines.
func TestRewritesNothingButBounds(t *testing.T) {
	in := crd(`
name:
  description: |-
    A long description that controller-gen wraps over two lines, with: colons, 'quotes'
    and a second line.
  maxLength: 48
  type: string
`)
	out, _, err := boundCRD(in)
	if err != nil || string(out) != string(in) {
		t.Errorf("err %v; output differs from input:\n%s", err, out)
	}
}

func specOf(t *testing.T, manifest []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	schema := m["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)
	return schema["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
}
