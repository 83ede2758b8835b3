package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What only MXJob's old forms had: the fork's way of telling replicas where the scheduler is,
// and the job modes of Kubeflow's operators.

// forkRoot warns where the fork's DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT differ from today's:
// it told each replica replica 0 of the first group as the scheduler, and its own group's port,
// which worked when the SCHEDULER came first and every group had the same port.
func forkRoot(r *listRead) {
	ports := map[int32][]string{} // port → groups
	for _, g := range r.groups {
		ports[g.port] = append(ports[g.port], g.typ)
	}
	if first := r.groups[0].typ; first != string(v1beta1.MXReplicaScheduler) {
		r.w.add("%s told every replica that the scheduler was replica 0 of the first group (here %s) as DMLC_PS_ROOT_URI; "+
			"today's MXJob tells them the SCHEDULER's address, wherever the group is", r.form.operator, first)
	}
	if len(ports) > 1 {
		r.w.add("the groups have different ports (%s): %s told each replica its own group's %s as DMLC_PS_ROOT_PORT; "+
			"today's MXJob tells every replica the SCHEDULER's port", portList(ports), r.form.operator, r.form.portKey)
	}
}

// portList is "SCHEDULER and SERVER on 9000, WORKER on 9001", ports in ascending order.
func portList(ports map[int32][]string) string {
	keys := slices.Sorted(maps.Keys(ports))
	parts := make([]string, len(keys))
	for i, p := range keys {
		parts[i] = fmt.Sprintf("%s on %d", joinAnd(ports[p]), p)
	}
	return strings.Join(parts, ", ")
}

// listJobMode reads the jobMode of Kubeflow's later v1alpha1 operator: dist ran the job
// distributed, as every MXJob runs now; local ran a WORKER alone, without a scheduler.
func listJobMode(r *listRead) error {
	mode, path, ok, err := r.spec.str("jobMode")
	if err != nil || !ok {
		return err
	}
	switch mode {
	case "", "dist":
		r.w.add("dropped %s: %s: every MXJob runs distributed, with its scheduler", path, orUnset(mode))
	case "local":
		r.w.add("dropped %s: local: it ran the WORKER alone, without a scheduler; today's MXJob always has a SCHEDULER group, "+
			"which the worker then trains with", path)
	default:
		return fmt.Errorf("%s: %q is not one of dist, local", path, mode)
	}
	return nil
}

// kubeflowJobMode reads the jobMode of Kubeflow's later MXJob: MXTrain is training with
// Scheduler, Server and Worker; MXTune is TVM auto-tuning, which mlkube does not run.
func kubeflowJobMode(spec *fields) error {
	mode, path, ok, err := spec.str("jobMode")
	if err != nil || !ok {
		return err
	}
	switch mode {
	case "", "MXTrain":
		return nil
	case "MXTune":
		return fmt.Errorf("%s: MXTune is TVM auto-tuning (TunerTracker, TunerServer and Tuner replicas), which mlkube does not run: an MXJob trains, with Scheduler, Server and Worker replicas", path)
	}
	return fmt.Errorf("%s: %q is not one of MXTrain, MXTune", path, mode)
}
