package convert

import (
	"slices"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// jobKind is what the readers know of one of today's kinds: v1beta1's description of it (among
// it the keys of a replica group's type and port, and the default port), which replica decides
// the job, and the old forms it was written in. The readers are the same for every kind; this
// is all that differs.
type jobKind struct {
	*v1beta1.Kind
	facts
}

// facts are a kind's part of the table below: what convert alone knows of it. What today's
// kind is (its keys, types, container and default port) is v1beta1's table's.
type facts struct {
	// decides says in words which replica ends the job today (the kind's Deciders), and advice
	// what to do when an old job wanted another.
	decides, advice string
	// tensorboard: today's kind has spec.tensorboard, which the list form had too.
	tensorboard bool
	// list describes the replica list form (spec.replicaSpecs) of today's API and older ones.
	list listKind
	// kubeflow describes Kubeflow's form (kubeflow.org/v1 and its betas); nil when Kubeflow
	// had no such kind.
	kubeflow *kubeflowKind
}

// table holds the facts of each kind by its name. Every kind of v1beta1.Kinds should have them:
// TestEveryKindHasFacts fails for one that has none. Until then devctl reads such a kind in
// today's form only (defaultFacts), rather than refusing to start.
var table = map[string]facts{
	"TfJob": {
		decides:     "the MASTER or CHIEF decides, or else worker 0",
		advice:      ". To keep the old behaviour, make that replica the MASTER group (one replica)",
		tensorboard: true,
		list:        tfList,
		kubeflow: &kubeflowKind{
			kind: "TFJob", versions: []string{"v1", "v1beta2", "v1beta1", "v1alpha2"}, specsKey: "tfReplicaSpecs",
			types:    []kubeflowType{{"Chief", "CHIEF"}, {"Master", "MASTER"}, {"Worker", "WORKER"}, {"PS", "PS"}, {"Evaluator", "EVALUATOR"}},
			portName: "tfjob-port", port: 2222, restartPolicy: v1beta1.RestartPolicyNever,
			dropped: []droppedField{
				{key: "successPolicy", kind: "string", why: "mlkube ends the job when its MASTER or CHIEF succeeds, or else worker 0; it cannot wait for every worker"},
				{key: "enableDynamicWorker", kind: "bool", why: "a TfJob's replica groups cannot change once it runs (every replica's TF_CONFIG names all the others)"},
			},
		},
	},
	"MXJob": {
		decides: "the SCHEDULER decides (MXNet's scheduler exits once every worker has finished)",
		list:    mxList,
		kubeflow: &kubeflowKind{
			kind: "MXJob", versions: []string{"v1", "v1beta1", "v1alpha2"}, specsKey: "mxReplicaSpecs",
			types:    []kubeflowType{{"Scheduler", "SCHEDULER"}, {"Server", "SERVER"}, {"Worker", "WORKER"}},
			portName: "mxjob-port", port: 9091, restartPolicy: v1beta1.RestartPolicyNever,
			checkSpec: kubeflowJobMode,
			otherMode: otherMode{types: []string{"TunerTracker", "TunerServer", "Tuner"},
				why: "is a replica of jobMode MXTune, TVM auto-tuning, which mlkube does not run: an MXJob trains, with Scheduler, Server and Worker replicas"},
		},
	},
	"PyTorchJob": {
		decides: "the MASTER (rank 0) decides",
		list:    todaysList,
		kubeflow: &kubeflowKind{
			kind: "PyTorchJob", versions: []string{"v1", "v1beta2", "v1beta1", "v1alpha2"}, specsKey: "pytorchReplicaSpecs",
			types:    []kubeflowType{{"Master", "MASTER"}, {"Worker", "WORKER"}},
			portName: "pytorchjob-port", port: 23456, restartPolicy: v1beta1.RestartPolicyOnFailure,
			dropped: []droppedField{
				{key: "elasticPolicy", why: "mlkube runs a fixed number of replicas, one node each: torchrun's elastic rendezvous " +
					"(minReplicas, maxReplicas, rdzvBackend, maxRestarts, metrics) has no equivalent; the job's replicas are the groups' replicas"},
				{key: "nprocPerNode", why: "mlkube runs one process per pod (PET_NPROC_PER_NODE is 1); to run more, " +
					"start them with torchrun --nproc-per-node in the pytorch container's command"},
			},
		},
	},
	"JAXJob": {
		decides: "worker 0 (JAX process 0, the coordinator) decides",
		list:    todaysList,
		// Kubeflow's JAXJob (training-operator v1.9, kubeflow.org/v1 only): one replica type,
		// Worker; the jax container's port named jaxjob-port, else 6666; restartPolicy Never.
		kubeflow: &kubeflowKind{
			kind: "JAXJob", versions: []string{"v1"}, specsKey: "jaxReplicaSpecs",
			types:    []kubeflowType{{"Worker", "WORKER"}},
			portName: "jaxjob-port", port: 6666, restartPolicy: v1beta1.RestartPolicyNever,
		},
	},
}

// jobKinds are today's kinds with their facts, in v1beta1.Kinds' order.
var jobKinds = kinds()

// kinds joins each kind of v1beta1's table with its facts, completing its list form with what
// the table says of today's kind: the keys of a group's type and port come first among their
// spellings, and a list form that reads today's API (todays) gets todaysForm.
func kinds() []*jobKind {
	var out []*jobKind
	for _, k := range v1beta1.Kinds {
		f, ok := table[k.Name]
		if !ok {
			f = defaultFacts(k)
		}
		f.list.keys.typ = append([]string{k.TypeField}, f.list.keys.typ...)
		f.list.keys.port = append([]string{k.PortField}, f.list.keys.port...)
		if f.list.todays {
			f.list.forms = append(slices.Clip(f.list.forms), todaysForm(k))
		}
		out = append(out, &jobKind{Kind: k, facts: f})
	}
	return out
}

// defaultFacts are what convert knows of a kind the table lacks: today's form, and who decides
// from v1beta1's table.
func defaultFacts(k *v1beta1.Kind) facts {
	return facts{decides: "the " + strings.Join(k.Deciders, " or ") + " decides", list: todaysList}
}

// kindOf is the jobKind of a job.
func kindOf(job v1beta1.Job) *jobKind {
	k := v1beta1.KindOf(job)
	for _, jk := range jobKinds {
		if jk.Kind == k {
			return jk
		}
	}
	return nil
}

// todaysList is the list form of a kind that had no other: today's API, read when a manifest is
// not quite in today's form.
var todaysList = listKind{
	keys:            listKeys{specs: []string{"replicaSpecs"}},
	todays:          true,
	missingTemplate: "every replica group needs the pod it runs",
}

// tfList is TfJob's list form: the first TensorFlow operator's mlkube.io/v1beta1 of 2017 (first
// in snake_case, then camelCase) and its successors, tensorflow.org/v1alpha1 and Kubeflow's
// kubeflow.org/v1alpha1. Manifests of that time mixed the spellings (Kubeflow's own README had
// replica_specs beside tfPort), so every spelling is read in every form. The old operators'
// defaults (their SetDefaults_TfJob): a group without tfReplicaType is the MASTER, replicas is
// 1, tfPort is 2222, and a PS group without a template runs TensorFlow's standard server in
// spec.tfImage. The types were MASTER, WORKER and PS, spelled as today's.
var tfList = listKind{
	keys: listKeys{
		specs: []string{"replicaSpecs", "replica_specs"}, typ: []string{"tf_replica_type"},
		port: []string{"tf_port"}, image: []string{"tfImage", "tf_image"},
		terminationPolicy: []string{"terminationPolicy", "termination_policy"},
		replicaName:       []string{"replicaName", "replica_name"}, replicaIndex: []string{"replicaIndex", "replica_index"},
		ignored: []string{"IsDefaultPS", "isDefaultPS", "is_default_ps"},
	},
	forms:           []listForm{tfForm("mlkube.io/v1beta1", "TfJob", true), tfForm("mlkube.io/v1beta1", "TfJob", false), tfForm("tensorflow.org/v1alpha1", "TfJob", false), tfForm("kubeflow.org/v1alpha1", "TFJob", false)},
	defaultTemplate: defaultPS,
	missingTemplate: "only a PS group may leave it out (it then runs TensorFlow's standard server)",
}

func tfForm(apiVersion, kind string, snakeCase bool) listForm {
	from := apiVersion + " " + kind
	switch {
	case apiVersion != v1beta1.GroupVersion.String():
	case snakeCase:
		from += " (2017, snake_case)"
	default:
		from += " (2017, camelCase)"
	}
	return listForm{
		apiVersion: apiVersion, kind: kind, snakeCase: snakeCase, from: from, operator: "the old operators",
		defaultType: "MASTER", portKey: "tfPort", defaultPort: 2222,
	}
}

// mxList is MXJob's list form: that of the first MXNet operators, both made from the first
// TensorFlow operator's code, the fork for MXNet (fioravanzo.org/v1alpha1) and Kubeflow's
// mx-operator (kubeflow.org/v1alpha1), and today's. A group has an mxReplicaType (SCHEDULER,
// SERVER, WORKER), replicas (default 1), a port and a pod template whose container named mxnet
// gets the DMLC_* env. The forms differ in their defaults:
//
//   - The fork called the port mxPort (default 9000); a group without a type was the SCHEDULER,
//     and the scheduler's exit ended the job. See forkRoot for its DMLC_PS_ROOT_*.
//   - Kubeflow's called it PsRootPort (default 9091) and told every replica the SCHEDULER's. A
//     group without a type was a WORKER, and worker 0's exit ended the job. Its later versions
//     added cleanupPodPolicy and jobMode (dist, local).
//
// Every spelling of the port is read in every form: manifests were copied between the two.
var mxList = listKind{
	keys: listKeys{
		specs: []string{"replicaSpecs"},
		port:  []string{"mxPort", "PsRootPort", "psRootPort"}, image: []string{"mxImage"},
		terminationPolicy: []string{"terminationPolicy"}, replicaName: []string{"replicaName"}, replicaIndex: []string{"replicaIndex"},
	},
	forms: []listForm{{
		apiVersion: "fioravanzo.org/v1alpha1", kind: "MXJob", from: "fioravanzo.org/v1alpha1 MXJob", operator: "the fork",
		portKey: "mxPort", defaultPort: 9000, defaultType: "SCHEDULER", decider: "SCHEDULER", warn: forkRoot,
	}, {
		apiVersion: "kubeflow.org/v1alpha1", kind: "MXJob", from: "kubeflow.org/v1alpha1 MXJob", operator: "Kubeflow's v1alpha1 operator",
		portKey: "PsRootPort", defaultPort: 9091, defaultType: "WORKER", decider: "WORKER",
	}},
	todays:          true,
	missingTemplate: "every replica group needs the pod it runs (the old MXJob operators required one too)",
	extra:           listJobMode,
}
