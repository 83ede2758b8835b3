package convert

import (
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// mxReplicaTypes are MXNet's roles, in the order a job lists them.
var mxReplicaTypes = []v1beta1.MXReplicaType{v1beta1.MXReplicaScheduler, v1beta1.MXReplicaServer, v1beta1.MXReplicaWorker}

// checkMX warns of what would keep a converted MXJob from passing today's validation (see
// docs/mxjob-api.md#validation) and says what to change; as for TfJob, the conversion does not
// make these changes itself.
func checkMX(job *v1beta1.MXJob, w *warnings) {
	checkName(job, "MXJob", w)

	count := map[v1beta1.MXReplicaType]int{}
	for _, r := range job.Spec.ReplicaSpecs {
		count[r.MXReplicaType]++
	}
	for _, t := range mxReplicaTypes {
		if count[t] > 1 {
			w.add("the job has %d %s groups: today's MXJob takes one group per type; merge them into one, adding up their replicas", count[t], t)
		}
	}
	if count[v1beta1.MXReplicaScheduler] == 0 {
		w.add("the job has no SCHEDULER group: every replica finds the cluster through it, and its exit decides the job; add one")
	}
	for _, r := range job.Spec.ReplicaSpecs {
		if r.MXReplicaType == v1beta1.MXReplicaScheduler && r.Replicas != 1 {
			w.add("the SCHEDULER group has %d replicas: today's MXJob runs exactly one scheduler, as MXNet does; set replicas: 1", r.Replicas)
		}
		if r.Replicas > 10000 {
			w.add("the %s group has %d replicas, more than today's MXJob allows (10000)", r.MXReplicaType, r.Replicas)
		}
		checkMXContainer(r, w)
	}
}

// checkMXContainer warns of a pod without a container named mxnet. The fork and Kubeflow's
// MXJob operators required that name too, so the conversion renames nothing: a pod without it
// did not run before either, or its training container is another one.
func checkMXContainer(r v1beta1.MXReplicaSpec, w *warnings) {
	var names []string
	for _, c := range r.Template.Spec.Containers {
		if c.Name == v1beta1.MXContainerName {
			return
		}
		names = append(names, c.Name)
	}
	has := "it has no containers"
	if len(names) > 0 {
		has = "it has " + strings.Join(names, ", ")
	}
	w.add("the %s group's pod has no container named mxnet (%s): name the training container mxnet, "+
		"which today's MXJob requires as the old MXJob operators did: that container gets the DMLC_* env and its exit code decides the replica's outcome",
		r.MXReplicaType, has)
}

func mxTypeList() string {
	s := make([]string, len(mxReplicaTypes))
	for i, t := range mxReplicaTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
