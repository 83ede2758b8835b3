package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// fields reads one object of a manifest the way an old operator would have: by key, with the
// key's old spellings, each value checked for its type. It remembers which keys were read, so
// what is left over is what the conversion drops. Every error names the field's path as the
// manifest spells it, e.g. spec.replica_specs[1].tf_replica_type.
type fields struct {
	path string
	m    map[string]any
	read map[string]bool
}

// object reads v, found at path, as an object.
func object(path string, v any) (*fields, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: is %s, not an object", path, describe(v))
	}
	return &fields{path: path, m: m, read: map[string]bool{}}, nil
}

// at is the path of the key.
func (f *fields) at(key string) string { return joinPath(f.path, key) }

// lookup finds the first of names that is set (null counts as unset, as it does for Kubernetes)
// and marks every one of them read. Two spellings of one field set at once are an error: which
// one the old operator read depended on its version.
func (f *fields) lookup(names ...string) (key string, v any, ok bool, err error) {
	for _, n := range names {
		f.read[n] = true
		nv, present := f.m[n]
		if !present || nv == nil {
			continue
		}
		if ok {
			return "", nil, false, fmt.Errorf("%s: both %s and %s are set; keep one", f.path, key, n)
		}
		key, v, ok = n, nv, true
	}
	return key, v, ok, nil
}

// has tells whether any of names is set, without marking them read.
func (f *fields) has(names ...string) bool {
	for _, n := range names {
		if v, ok := f.m[n]; ok && v != nil {
			return true
		}
	}
	return false
}

func (f *fields) str(names ...string) (string, string, bool, error) {
	key, v, ok, err := f.lookup(names...)
	if !ok || err != nil {
		return "", "", false, err
	}
	s, isStr := v.(string)
	if !isStr {
		return "", "", false, fmt.Errorf("%s: is %s, not a string", f.at(key), describe(v))
	}
	return s, f.at(key), true, nil
}

func (f *fields) boolean(names ...string) (bool, string, bool, error) {
	key, v, ok, err := f.lookup(names...)
	if !ok || err != nil {
		return false, "", false, err
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, "", false, fmt.Errorf("%s: is %s, not true or false", f.at(key), describe(v))
	}
	return b, f.at(key), true, nil
}

// integer reads a whole number. What range it may have is not for convert to say: once it is
// in today's job, the CRD says (see finish), and where today's Go type cannot hold it, int32Field.
func (f *fields) integer(names ...string) (int64, string, bool, error) {
	key, v, ok, err := f.lookup(names...)
	if !ok || err != nil {
		return 0, "", false, err
	}
	n, isInt := wholeNumber(v)
	if !isInt {
		return 0, "", false, fmt.Errorf("%s: %s is not a whole number that fits 64 bits", f.at(key), describe(v))
	}
	return n, f.at(key), true, nil
}

func (f *fields) object(names ...string) (*fields, bool, error) {
	key, v, ok, err := f.lookup(names...)
	if !ok || err != nil {
		return nil, false, err
	}
	o, err := object(f.at(key), v)
	return o, err == nil, err
}

func (f *fields) list(names ...string) ([]any, string, bool, error) {
	key, v, ok, err := f.lookup(names...)
	if !ok || err != nil {
		return nil, "", false, err
	}
	l, isList := v.([]any)
	if !isList {
		return nil, "", false, fmt.Errorf("%s: is %s, not a list", f.at(key), describe(v))
	}
	return l, f.at(key), true, nil
}

// raw reads a value of any type, for the typed decoding of Kubernetes structures.
func (f *fields) raw(names ...string) (any, string, bool, error) {
	key, v, ok, err := f.lookup(names...)
	if !ok || err != nil {
		return nil, "", false, err
	}
	return v, f.at(key), true, nil
}

// unread lists the paths of the keys nobody read whose values say something (a key set to
// null, false, 0, "" or an empty list or object drops nothing a person would miss).
func (f *fields) unread() []string {
	var out []string
	for k, v := range f.m {
		if !f.read[k] && !isEmpty(v) {
			out = append(out, f.at(k))
		}
	}
	sort.Strings(out)
	return out
}

// keys are the object's keys, sorted.
func (f *fields) keys() []string {
	out := make([]string, 0, len(f.m))
	for k := range f.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// wholeNumber reads a JSON number that is a whole number and fits an int64.
func wholeNumber(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	fl, err := n.Float64()
	if err != nil || fl != math.Trunc(fl) || math.Abs(fl) > 1<<53 {
		return 0, false
	}
	return int64(fl), true
}

// isEmpty tells whether v carries nothing: null, false, zero, "", or lists and objects holding
// only such values.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case string:
		return t == ""
	case json.Number:
		f, err := t.Float64()
		return err == nil && f == 0
	case []any:
		for _, e := range t {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range t {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	}
	return false
}

// describe says what a value is, for error messages: a string quoted, a number as written, or
// the kind of a list or object.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(t)
	case json.Number:
		return t.String()
	case bool:
		return strconv.FormatBool(t)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// joinAnd joins ["a", "b", "c"] as "a, b and c".
func joinAnd(items []string) string { return join(items, "and") }

// join joins ["a", "b", "c"] as "a, b <conj> c".
func join(items []string, conj string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}

// hasSnakeCase tells whether any key of the object has an underscore, the mark of the 2017
// mlkube.io API (replica_specs, tf_replica_type, tf_port, tensor_board, log_dir).
func hasSnakeCase(m map[string]any) bool {
	for k := range m {
		if strings.Contains(k, "_") {
			return true
		}
	}
	return false
}
