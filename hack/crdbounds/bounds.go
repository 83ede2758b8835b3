package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// limit is the range of values a Go integer can hold, as a CRD may state it.
type limit struct{ min, max int64 }

// MaxInt64AsFloat bounds an int64 both ways (its negative is the minimum): the widest bounds
// every apiserver compares right. It reads a CRD's bounds as float64s and compares an integer
// with them converted back to int64 (k8s.io/kube-openapi's validate.MaximumNativeType), and
// since kube-openapi 2026 (kube-apiserver 1.37) it first checks that a bound, written as the
// shortest decimal of its float64, parses as an int64. math.MaxInt64 reads as 2^63, which
// converts back to math.MinInt64 on amd64: kube-apiserver 1.34 then refuses every value ("should
// be less than or equal to -9223372036854775808"). math.MinInt64 converts exactly but writes as
// -9223372036854776000, which is no int64: 1.37 then refuses every value ("Minimum boundary
// value must be of type integer with format int64"). This is the largest float64 below 2^63; it
// writes as 9223372036854775000 and converts exactly. The 1023 int64s beyond it at either end
// are refused, which nothing needs. Numbers beyond int64 reach the apiserver as float64s, which
// `type: integer` refuses whatever the bounds.
const MaxInt64AsFloat = 1<<63 - 1024

// limits is the range of each integer format controller-gen writes: int32 for Go's int32, int64
// for Go's int64. Go's int and the unsigned types get no format or another one: such a field
// fails the generation until it is given one of these types.
var limits = map[string]limit{
	"int32": {math.MinInt32, math.MaxInt32},
	"int64": {-MaxInt64AsFloat, MaxInt64AsFloat},
}

// quantityPattern is the pattern controller-gen writes for resource.Quantity, an int-or-string
// whose decoder reads any number JSON can hold (1e+30 is a Quantity), so it needs no bounds.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// bounder walks a CRD's schema, parsed with json.Number for numbers, and bounds its integers.
type bounder struct {
	bounded, changed int      // integers that have bounds now; of those, the ones given new ones
	unbounded        []string // integers it cannot bound, and why
}

// node bounds the integers of schema s, at path, and below it.
func (b *bounder) node(s map[string]any, path string) {
	switch {
	case s["x-kubernetes-int-or-string"] == true:
		b.intOrString(s, path)
		return // its anyOf is the apiserver's fixed [integer, string], which takes no bounds
	case s["type"] == "integer":
		format, _ := s["format"].(string)
		if l, ok := limits[format]; ok {
			b.bound(s, l)
		} else {
			b.unbounded = append(b.unbounded, fmt.Sprintf("%s: an integer of format %q, which no Go type of ours decodes into: make its Go field int32 or int64", path, format))
		}
	}
	for _, name := range sortedKeys(s["properties"]) {
		b.node(s["properties"].(map[string]any)[name].(map[string]any), path+"."+name)
	}
	for _, key := range []string{"items", "additionalProperties", "not"} {
		if sub, ok := s[key].(map[string]any); ok {
			b.node(sub, path+"["+key+"]")
		}
	}
	for _, key := range []string{"anyOf", "allOf", "oneOf"} {
		branches, _ := s[key].([]any)
		for i, sub := range branches {
			b.node(sub.(map[string]any), fmt.Sprintf("%s[%s %d]", path, key, i))
		}
	}
}

// intOrString bounds an int-or-string. Its bounds stand beside x-kubernetes-int-or-string,
// where they apply to numbers only: the apiserver refuses any other shape of its anyOf.
func (b *bounder) intOrString(s map[string]any, path string) {
	switch s["pattern"] {
	case nil: // intstr.IntOrString, whose number is an int32
		b.bound(s, limits["int32"])
	case quantityPattern:
	default:
		b.unbounded = append(b.unbounded, fmt.Sprintf("%s: an int-or-string with a pattern of its own, whose Go type is unknown here", path))
	}
}

// bound gives s the minimum and maximum of l, keeping a bound as tight or tighter.
func (b *bounder) bound(s map[string]any, l limit) {
	changed := tighten(s, "minimum", "exclusiveMinimum", l.min, func(have, limit float64) bool { return have >= limit })
	changed = tighten(s, "maximum", "exclusiveMaximum", l.max, func(have, limit float64) bool { return have <= limit }) || changed
	b.bounded++
	if changed {
		b.changed++
	}
}

// tighten sets s[key] to limit unless it holds a bound within it already; an exclusive flag
// goes with the bound it qualified.
func tighten(s map[string]any, key, exclusive string, limit int64, within func(have, limit float64) bool) bool {
	if n, ok := s[key].(json.Number); ok {
		if have, err := n.Float64(); err == nil && within(have, float64(limit)) {
			return false
		}
	}
	s[key] = json.Number(strconv.FormatInt(limit, 10))
	delete(s, exclusive)
	return true
}

func sortedKeys(m any) []string {
	props, _ := m.(map[string]any)
	return slices.Sorted(maps.Keys(props))
}
