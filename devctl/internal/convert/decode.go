package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// decode reads v, the part of the manifest at path, into out, a Kubernetes type (a pod
// template, volumes, object metadata). A value of the wrong type is an error naming its field.
// Fields the type does not know are not an error: old manifests carry fields Kubernetes has
// since removed. decode returns their paths, so that the conversion can say what it dropped.
func decode(path string, v any, out any) (dropped []string, err error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, decodeError(path, err)
	}
	// A job decodes leniently, so that one a cluster holds cannot fail a whole list; a manifest
	// handed in is read strictly, and a value its field cannot hold is an error naming it.
	if job, ok := out.(v1beta1.Job); ok && job.Unreadable() != "" {
		return nil, fmt.Errorf("%s", joinPath(path, job.Unreadable()))
	}
	// What the type kept is what it writes back; what it did not keep is dropped.
	back, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	kept, err := parseJSON(back)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	diffKeys(path, v, kept, &dropped)
	sort.Strings(dropped)
	return dropped, nil
}

// decodeError says which field of the part at path had the wrong type.
func decodeError(path string, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		at := path
		if typeErr.Field != "" {
			at = joinPath(path, typeErr.Field)
		}
		return fmt.Errorf("%s: is %s, which does not fit a %s", at, withArticle(typeErr.Value), typeErr.Type)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// withArticle is "an object", "a number", ...: JSON kinds in a sentence.
func withArticle(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// diffKeys adds to dropped the paths of the keys of orig that kept lacks and whose values say
// something (see isEmpty).
func diffKeys(path string, orig, kept any, dropped *[]string) {
	switch o := orig.(type) {
	case map[string]any:
		k, _ := kept.(map[string]any)
		for key, ov := range o {
			kv, ok := k[key]
			if !ok {
				if !isEmpty(ov) {
					*dropped = append(*dropped, joinPath(path, key))
				}
				continue
			}
			diffKeys(joinPath(path, key), ov, kv, dropped)
		}
	case []any:
		k, _ := kept.([]any)
		for i, ov := range o {
			if i < len(k) {
				diffKeys(path+"["+strconv.Itoa(i)+"]", ov, k[i], dropped)
			}
		}
	}
}

// joinPath is the path of key inside the part at path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// parseJSON reads JSON keeping numbers as written (json.Number), so that a large integer
// survives the trip and a float can be told from a whole number.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
