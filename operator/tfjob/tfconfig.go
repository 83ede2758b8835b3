package tfjob

import (
	"encoding/json"
	"errors"
	"fmt"
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

// maxEnvString is the most bytes Linux takes for one NAME=value string of a new process's
// environment, NUL included (MAX_ARG_STRLEN: 32 pages of 4 KiB). A container given a longer
// TF_CONFIG cannot start at all ("argument list too long").
const maxEnvString = 32 * 4096

// TFConfig builds the TF_CONFIG of replica (typ, index). The cluster lists every replica's
// address by its lower-case type (master, chief, worker, ps). Evaluators are left out of the
// cluster: TensorFlow runs them beside the cluster, not in it, and rejects a cluster spec that
// lists them; an evaluator still gets the cluster and its own task.
//
// The apiserver refuses the jobs that would give a wrong TF_CONFIG; the groups are checked
// again here, naming the field, so that no such job (one stored before a rule existed, say)
// gets one. A TF_CONFIG too long for an environment variable is an error, not a pod that
// cannot start.
func TFConfig(job client.Object, replicas []replicajob.Replica, typ string, index int) (string, error) {
	if err := checkReplicas(replicas, typ, index); err != nil {
		return "", err
	}
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
	if err != nil {
		return "", err
	}
	if size := len("TF_CONFIG=") + len(b) + 1; size > maxEnvString {
		return "", fmt.Errorf("TF_CONFIG would be %d bytes, over the %d bytes Linux allows one environment variable, "+
			"so the container could not start: use fewer replicas, or a shorter job name or namespace", size, maxEnvString)
	}
	return string(b), nil
}

// tfReplicaTypes are the TfJob's replica types, as the CRD's enum has them.
var tfReplicaTypes = []string{string(v1beta1.TfReplicaMaster), string(v1beta1.TfReplicaChief), string(v1beta1.TfReplicaWorker), string(v1beta1.TfReplicaPS), string(v1beta1.TfReplicaEvaluator)}

// checkReplicas names each replica group field that would make TF_CONFIG wrong, as the CRD
// would, and a task that is none of the job's replicas.
func checkReplicas(replicas []replicajob.Replica, typ string, index int) error {
	_, errs := replicajob.CheckGroups(replicas, tfReplicaTypes, replicajob.Fields{Type: "tfReplicaType", Port: "tfPort"}, typ, index)
	return errors.Join(errs...)
}
