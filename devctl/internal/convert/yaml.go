package convert

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// YAML prints job (of any kind) as a manifest to keep and apply: apiVersion and kind set, and
// none of what a cluster adds (status, uid, resourceVersion, creationTimestamp, managedFields,
// ...) or what the Go types print when empty (creationTimestamp: null, resources: {},
// metadata: {}).
func YAML(job client.Object) ([]byte, error) {
	k := v1beta1.KindOf(job)
	if k == nil {
		return nil, fmt.Errorf("cannot print a %T: it is no job of mlkube's", job)
	}
	data, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	tree, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	m, _ := tree.(map[string]any)
	meta, err := json.Marshal(keptMeta(job))
	if err != nil {
		return nil, err
	}
	if m["metadata"], err = parseJSON(meta); err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = v1beta1.GroupVersion.String(), k.Name
	delete(m, "status")
	tidy(m)
	if data, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(data)
}

// noisyWhenEmpty are the fields the Go types print even when empty, where empty means unset.
// (emptyDir: {} is not one of them: there, empty is the setting.)
var noisyWhenEmpty = map[string]bool{"metadata": true, "resources": true, "runPolicy": true, "status": true}

// tidy removes nulls, and the fields of noisyWhenEmpty that are empty, throughout v.
func tidy(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			tidy(e)
			if e == nil {
				delete(t, k)
				continue
			}
			if m, ok := e.(map[string]any); ok && len(m) == 0 && noisyWhenEmpty[k] {
				delete(t, k)
			}
		}
	case []any:
		for _, e := range t {
			tidy(e)
		}
	}
}

// keptMeta is the metadata a manifest keeps: what a person wrote.
func keptMeta(job client.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:         job.GetName(),
		GenerateName: job.GetGenerateName(),
		Namespace:    job.GetNamespace(),
		Labels:       job.GetLabels(),
		Annotations:  job.GetAnnotations(),
	}
}
