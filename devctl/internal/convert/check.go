package convert

import (
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// check warns of what would keep a converted job from passing today's validation (the CRD's
// schema and CEL rules; see docs/tfjob-api.md#validation) and says what to change. The
// conversion does not make these changes itself: each is a decision about the job (which
// replica decides, how groups merge, what the training container is called) that the old
// operator did not make either.
func check(job *v1beta1.TfJob, w *warnings) {
	checkName(job, "TfJob", w)

	count := map[v1beta1.TfReplicaType]int{}
	for _, r := range job.Spec.ReplicaSpecs {
		count[r.TfReplicaType]++
	}
	for _, t := range []v1beta1.TfReplicaType{v1beta1.TfReplicaMaster, v1beta1.TfReplicaChief, v1beta1.TfReplicaWorker, v1beta1.TfReplicaPS, v1beta1.TfReplicaEvaluator} {
		if count[t] > 1 {
			w.add("the job has %d %s groups: today's TfJob takes one group per type; merge them into one, adding up their replicas", count[t], t)
		}
	}
	if count[v1beta1.TfReplicaMaster] > 0 && count[v1beta1.TfReplicaChief] > 0 {
		w.add("the job has both a MASTER and a CHIEF group: both name the replica that decides when the job is done; keep one (make the other a WORKER group)")
	}
	if count[v1beta1.TfReplicaMaster]+count[v1beta1.TfReplicaChief]+count[v1beta1.TfReplicaWorker] == 0 {
		w.add("the job has no MASTER, CHIEF or WORKER group: one of them decides when the job is done; add one")
	}

	for _, r := range job.Spec.ReplicaSpecs {
		deciding := r.TfReplicaType == v1beta1.TfReplicaMaster || r.TfReplicaType == v1beta1.TfReplicaChief
		if deciding && r.Replicas != 1 {
			w.add("the %s group has %d replicas: today's TfJob runs exactly one %s, the replica that decides when the job is done; "+
				"set replicas: 1 and add the others to a WORKER group", r.TfReplicaType, r.Replicas, r.TfReplicaType)
		}
		if r.Replicas > 10000 {
			w.add("the %s group has %d replicas, more than today's TfJob allows (10000)", r.TfReplicaType, r.Replicas)
		}
		checkContainer(r, w)
	}
}

// dns1035 is the CRD's rule for job names: they prefix the replica services' names.
var dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// checkName warns of a name today's CRDs refuse; kind names the job's kind in the message.
func checkName(job metav1.Object, kind string, w *warnings) {
	name := job.GetName()
	switch {
	case name == "" && job.GetGenerateName() == "":
		w.add("metadata.name is unset: give the job a name")
	case name == "":
	case len(name) > 48:
		w.add("metadata.name %q is %d characters long: today's %s allows 48 (each replica's service is named <name>-<type>-<index>, and service names stop at 63); shorten it", name, len(name), kind)
	case !dns1035.MatchString(name):
		w.add("metadata.name %q must start with a letter and hold only lower-case letters, digits and '-' (it prefixes the replica services' names); rename the job", name)
	}
}

// checkContainer warns of a pod without a container named tensorflow. Every old operator
// required one too, so the conversion renames nothing: a pod without it did not run before
// either, or its training container is another one.
func checkContainer(r v1beta1.TfReplicaSpec, w *warnings) {
	var names []string
	for _, c := range r.Template.Spec.Containers {
		if c.Name == v1beta1.TfContainerName {
			return
		}
		names = append(names, c.Name)
	}
	has := "it has no containers"
	if len(names) > 0 {
		has = "it has " + strings.Join(names, ", ")
	}
	w.add("the %s group's pod has no container named tensorflow (%s): name the training container tensorflow, "+
		"which today's TfJob requires as the old operators did: that container gets TF_CONFIG and its exit code decides the replica's outcome",
		r.TfReplicaType, has)
}
