package tfjob

import (
	"encoding/json"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

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

// TFConfig builds the TF_CONFIG of replica (typ, index). The cluster lists every replica's
// address by its lower-case type (master, chief, worker, ps). Evaluators are left out of the
// cluster: TensorFlow runs them beside the cluster, not in it, and rejects a cluster spec that
// lists them; an evaluator still gets the cluster and its own task.
func TFConfig(job client.Object, replicas []replicajob.Replica, typ string, index int) (string, error) {
	cfg := Config{Cluster: map[string][]string{}, Task: Task{Type: strings.ToLower(typ), Index: index}, Environment: "cloud"}
	for _, r := range replicas {
		if r.Type == string(v1beta1.TfReplicaEvaluator) {
			continue
		}
		key := strings.ToLower(r.Type)
		for i := 0; i < int(r.Replicas); i++ {
			cfg.Cluster[key] = append(cfg.Cluster[key], replicajob.Host(job, r.Type, i, r.Port))
		}
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}
