package convert

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// The CRD is the one statement of what a job may be (operator/crdvalidate), so convert checks no
// range or enum of today's API: it carries each value into today's job as written, translating
// only what the old forms spelled differently, and the CRD's refusals reach the person as
// warnings in the apiserver's words (finish), naming the field as the manifest has it too. What
// is left to convert is a value today's Go types cannot hold at all, which would never reach the
// apiserver as written: a string for a number is an error of its own (fields), and a number past
// an int32, or a 0 the type would take for unset, is one in the CRD's words (int32Field).

// int32Field is n, read at path, as today's int32 field at: its path in a job of kind k as the
// apiserver names it, a group's in the first group (spec.replicaSpecs[0].tfPort). A number past
// 32 bits, or 0 where zeroUnset (the field would be left out, and defaulted), is an error naming
// path, saying what the CRD takes there.
func (k *jobKind) int32Field(n int64, path, at string, zeroUnset bool) (int32, error) {
	if n == int64(int32(n)) && (n != 0 || !zeroUnset) {
		return int32(n), nil
	}
	if why := k.refusal(at, n); why != "" {
		return 0, fmt.Errorf("%s: %s", path, why)
	}
	return 0, fmt.Errorf("%s: %d cannot be kept: today's %s %s holds no such value", path, n, k.Name, at)
}

// refusal is what the CRD says of value at the field at of a job of kind k, the value alone
// (every rule run, the errors at other fields left out); "" when it takes it. at's list items
// are [0]: spec.replicaSpecs[0].replicas.
func (k *jobKind) refusal(at string, value any) string {
	obj := map[string]any{"apiVersion": v1beta1.GroupVersion.String(), "kind": k.Name, "metadata": map[string]any{"name": "x"}}
	m, keys := obj, strings.Split(at, ".")
	for _, key := range keys[:len(keys)-1] {
		child := map[string]any{}
		if name, ok := strings.CutSuffix(key, "[0]"); ok {
			m[name] = []any{child}
		} else {
			m[key] = child
		}
		m = child
	}
	m[keys[len(keys)-1]] = value
	for _, e := range crdvalidate.ValidateAll(&unstructured.Unstructured{Object: obj}) {
		if e.Field == at {
			return strings.TrimPrefix(crdvalidate.Line(e), at+": ")
		}
	}
	return ""
}

// origins say where the manifest had the fields of the converted job, for a refusal of the CRD
// to name both: spec.replicaSpecs[1].tfPort was spec.replica_specs[2].tf_port.
type origins map[string]origin

type origin struct {
	path string
	// below: what is under the field is spelled the same in both (a pod template).
	below bool
}

// set says that today's field at was path in the manifest; below, that what is under it is
// spelled the same.
func (o origins) set(at, path string, below bool) {
	if path != "" {
		o[at] = origin{path, below}
	}
}

// group records where the manifest had the fields of replica group i of the converted job.
func (o origins) group(i int, g *replicaGroup) {
	at := fmt.Sprintf("spec.replicaSpecs[%d]", i)
	o.set(at, g.path, false)
	for key, path := range g.from {
		o.set(at+"."+key, path, key == "template")
	}
}

// of is where the manifest had the field at, or the nearest field above it that it had: ""
// when that is at itself, or unknown.
func (o origins) of(at string) string {
	for up := at; up != ""; up = parent(up) {
		if f, ok := o[up]; ok {
			path := f.path
			if f.below {
				path += at[len(up):]
			}
			if path == at {
				return ""
			}
			return path
		}
	}
	return ""
}

// parent is the field that holds at: spec.replicaSpecs[0] for spec.replicaSpecs[0].tfPort,
// spec.replicaSpecs for spec.replicaSpecs[0]; "" for a field at the top.
func parent(at string) string {
	i := strings.LastIndexAny(at, ".[")
	if i < 0 {
		return ""
	}
	return at[:i]
}

// refused is the warning of one refusal of the CRD: in its words, and where the manifest had
// the field when it named it otherwise.
func (o origins) refused(e *field.Error) string {
	line := "the apiserver would refuse the job: " + crdvalidate.Line(e)
	if path := o.of(e.Field); path != "" {
		line += "; in the manifest, " + path
	}
	return line
}
