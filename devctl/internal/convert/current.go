package convert

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// isCurrent tells a TfJob manifest already in today's API by its shape: a replicaSpecs list
// whose groups all name their type and carry a template without a restartPolicy of its own,
// nothing spelled the 2017 way, no field today's TfJob lacks, and no replicas or tfPort of 0
// (which the Go type could not keep apart from unset). Anything else with the same apiVersion
// is taken for the 2017 camelCase form, which looks the same but leaned on those defaults.
func isCurrent(doc map[string]any) bool {
	return !usesSnakeCase(doc) && hasCurrentShape(doc, "TfJob", "tfReplicaType", "tfPort", &v1beta1.TfJob{})
}

// isCurrentMX tells an MXJob manifest already in today's API the same way: every group names
// its mxReplicaType, no replicas or port of 0, no restartPolicy in a template, and no field
// today's MXJob lacks. Anything else is read like the older MXJob forms, which look the same.
func isCurrentMX(doc map[string]any) bool {
	return hasCurrentShape(doc, "MXJob", "mxReplicaType", "port", &v1beta1.MXJob{})
}

// hasCurrentShape checks the shape both kinds share: kind spelled as today, a spec.replicaSpecs
// list of groups that name their type (typeKey) and whose replicas and port (portKey) are not
// 0, templates without a restartPolicy, and nothing the Go type of the kind (into) drops.
func hasCurrentShape(doc map[string]any, kind, typeKey, portKey string, into client.Object) bool {
	if doc["kind"] != kind {
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
		if t, _ := group[typeKey].(string); t == "" {
			return false
		}
		for _, k := range []string{"replicas", portKey} {
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
	dropped, err := decode("", doc, into)
	return err == nil && len(dropped) == 0
}

// passThrough returns a current manifest as it is, read into job (an empty TfJob or MXJob).
func passThrough(doc map[string]any, job client.Object) (*Result, error) {
	if _, err := decode("", doc, job); err != nil {
		return nil, err
	}
	return &Result{Job: job}, nil
}
