package convert

import (
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// isCurrent tells a manifest of kind k already in today's API by its shape: a replicaSpecs
// list whose groups all name their type and carry a template without a restartPolicy of its
// own, nothing spelled the 2017 way, no field today's kind lacks, and no replicas or port of 0
// (which the Go type could not keep apart from unset). Anything else of the same apiVersion
// and kind is read in the list form, which looks the same but leans on those defaults.
func isCurrent(doc map[string]any, k *jobKind) bool {
	if doc["kind"] != k.Name || usesSnakeCase(doc) {
		return false
	}
	spec, ok := doc["spec"].(map[string]any)
	if !ok {
		return false
	}
	groups, ok := spec["replicaSpecs"].([]any)
	if !ok || len(groups) == 0 {
		return false
	}
	for _, g := range groups {
		group, ok := g.(map[string]any)
		if !ok {
			return false
		}
		if t, _ := group[k.TypeField].(string); t == "" {
			return false
		}
		for _, key := range []string{"replicas", k.PortField} {
			if v, set := group[key]; set && isEmpty(v) {
				return false
			}
		}
		template, ok := group["template"].(map[string]any)
		if !ok {
			return false
		}
		if podSpec, ok := template["spec"].(map[string]any); ok && podSpec["restartPolicy"] != nil {
			return false
		}
	}
	dropped, err := decode("", doc, k.New())
	return err == nil && len(dropped) == 0
}

// passThrough returns a current manifest of kind k as it is.
func passThrough(doc map[string]any, k *jobKind) (*Result, error) {
	job := k.New()
	if _, err := decode("", doc, job); err != nil {
		return nil, err
	}
	return &Result{Job: job, Invalid: crdvalidate.Validate(job)}, nil
}
