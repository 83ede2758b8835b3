package convert

import (
	"fmt"
	"math"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// terminationPolicy reads tensorflow.org/v1alpha1's choice of the replica whose exit ends the
// job. Today that replica is fixed: the MASTER (or CHIEF), else worker 0.
func terminationPolicy(spec *fields, job *v1beta1.TfJob, w *warnings) error {
	tp, ok, err := spec.object("terminationPolicy", "termination_policy")
	if err != nil || !ok {
		return err
	}
	chief, ok, err := tp.object("chief")
	if err != nil {
		return err
	}
	w.dropped(tp.unread(), "today's TfJob has no such fields")
	if !ok {
		return nil
	}
	name, _, _, err := chief.str("replicaName", "replica_name")
	if err != nil {
		return err
	}
	index, _, _, err := chief.integer(0, math.MaxInt32, "replicaIndex", "replica_index")
	if err != nil {
		return err
	}
	w.dropped(chief.unread(), "today's TfJob has no such fields")
	decider := decidingType(job)
	if decider != "" && strings.EqualFold(name, string(decider)) && index == 0 {
		return nil // what today's TfJob does anyway
	}
	now := "no group can decide as the job stands"
	if decider != "" {
		now = fmt.Sprintf("here %s 0", decider)
	}
	w.add("%s names %s %d as the replica whose exit ends the job, which today's TfJob cannot express: "+
		"the MASTER or CHIEF decides, or else worker 0 (%s). To keep the old behaviour, make that replica the MASTER group (one replica)",
		chief.path, orUnset(name), index, now)
	return nil
}

// decidingType is the type whose replica 0 ends the job: MASTER or CHIEF, else WORKER.
func decidingType(job *v1beta1.TfJob) v1beta1.TfReplicaType {
	var worker bool
	for _, r := range job.Spec.ReplicaSpecs {
		switch r.TfReplicaType {
		case v1beta1.TfReplicaMaster, v1beta1.TfReplicaChief:
			return r.TfReplicaType
		case v1beta1.TfReplicaWorker:
			worker = true
		}
	}
	if worker {
		return v1beta1.TfReplicaWorker
	}
	return ""
}
