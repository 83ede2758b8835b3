package crdfile

import (
	"fmt"
	"slices"
	"strings"
)

// Child is the schema at path under s: property names, "[]" for a list's items.
func Child(s map[string]any, path ...string) (map[string]any, error) {
	for i, name := range path {
		var next map[string]any
		if name == "[]" {
			next, _ = s["items"].(map[string]any)
		} else {
			props, _ := s["properties"].(map[string]any)
			next, _ = props[name].(map[string]any)
		}
		if next == nil {
			return nil, fmt.Errorf("no property %s", strings.Join(path[:i+1], "."))
		}
		s = next
	}
	return s, nil
}

// SetRules puts rules (x-kubernetes-validations entries) after schema s's other rules, first
// removing those that ours says it writes, so that a second run writes what the first did.
func SetRules(s map[string]any, ours func(rule map[string]any) bool, rules []map[string]any) {
	have, _ := s["x-kubernetes-validations"].([]any)
	kept := slices.DeleteFunc(slices.Clone(have), func(v any) bool {
		m, _ := v.(map[string]any)
		return ours(m)
	})
	for _, r := range rules {
		kept = append(kept, r)
	}
	s["x-kubernetes-validations"] = kept
}
