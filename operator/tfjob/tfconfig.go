package tfjob

import (
	"encoding/json"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// Config is TensorFlow's TF_CONFIG: the whole cluster, and which task of it this process is.
type Config struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        Task                `json:"task"`
	Environment string              `json:"environment"`
}

// Task names one process of the cluster.
type Task struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// TFConfig is the TF_CONFIG of replica (typ, index). The cluster lists every replica's address
// by its lower-case type (master, chief, worker, ps). Evaluators are left out of the cluster:
// TensorFlow runs them beside the cluster, not in it, and rejects a cluster spec that lists
// them; an evaluator still gets the cluster and its own task.
func TFConfig(c replicajob.Cluster, typ string, index int) string {
	cfg := Config{Cluster: map[string][]string{}, Task: Task{Type: strings.ToLower(typ), Index: index}, Environment: "cloud"}
	for _, g := range c.Groups {
		if g.Type == string(v1beta1.TfReplicaEvaluator) {
			continue
		}
		key := strings.ToLower(g.Type)
		for i := range g.Hosts {
			cfg.Cluster[key] = append(cfg.Cluster[key], g.Addr(i))
		}
	}
	b, _ := json.Marshal(cfg) // strings and ints only: it cannot fail
	return string(b)
}
