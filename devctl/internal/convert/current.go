package convert

import (
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// isCurrent tells a manifest already in today's API by its shape: a replicaSpecs list whose
// groups all name their type and carry a template without a restartPolicy of its own, nothing
// spelled the 2017 way, no field today's TfJob lacks, and no replicas or tfPort of 0 (which
// the Go type could not keep apart from unset). Anything else with the same apiVersion is
// taken for the 2017 camelCase form, which looks the same but leaned on those defaults.
func isCurrent(doc map[string]any) bool {
	if doc["kind"] != "TfJob" || usesSnakeCase(doc) {
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
		if t, _ := group["tfReplicaType"].(string); t == "" {
			return false
		}
		for _, k := range []string{"replicas", "tfPort"} {
			if v, set := group[k]; set && isEmpty(v) {
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
	var job v1beta1.TfJob
	dropped, err := decode("", doc, &job)
	return err == nil && len(dropped) == 0
}

// passThrough returns a current manifest as it is.
func passThrough(doc map[string]any) (*Result, error) {
	var job v1beta1.TfJob
	if _, err := decode("", doc, &job); err != nil {
		return nil, err
	}
	return &Result{Job: &job}, nil
}
