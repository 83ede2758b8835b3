package convert

import (
	"fmt"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Kubeflow's MXJob (kubeflow.org/v1alpha2 to v1) keys its replica groups by type in
// spec.mxReplicaSpecs, as its TFJob does: replicas 1, restartPolicy Never and the port of the
// mxnet container's port named mxjob-port (else 9091) by default, type keys matched without
// regard to case. spec.jobMode MXTrain is training with Scheduler, Server and Worker; MXTune
// is TVM auto-tuning with TunerTracker, TunerServer and Tuner, which mlkube does not run.

// kubeflowMXTypes are Kubeflow's MXNet training replica types, in the order the converted job
// lists them.
var kubeflowMXTypes = []struct {
	key string
	typ v1beta1.MXReplicaType
}{
	{"Scheduler", v1beta1.MXReplicaScheduler},
	{"Server", v1beta1.MXReplicaServer},
	{"Worker", v1beta1.MXReplicaWorker},
}

// kubeflowMXTuneTypes are the replica types of jobMode MXTune.
var kubeflowMXTuneTypes = []string{"TunerTracker", "TunerServer", "Tuner"}

// kubeflowMXPortName names the container port Kubeflow took the MXNet port from.
const kubeflowMXPortName = "mxjob-port"

func fromKubeflowMX(docMap map[string]any, from string) (*Result, error) {
	w := &warnings{}
	w.add("converted from %s, an older API, to today's mlkube.io/v1beta1 MXJob: keep the converted manifest in place of the old one", from)
	doc, err := object("", docMap)
	if err != nil {
		return nil, err
	}
	meta, spec, err := readJob(doc, w)
	if err != nil {
		return nil, err
	}
	job := &v1beta1.MXJob{ObjectMeta: meta}
	job.APIVersion = v1beta1.GroupVersion.String()
	job.Kind = "MXJob"

	if mode, path, ok, err := spec.str("jobMode"); err != nil {
		return nil, err
	} else if ok {
		switch mode {
		case "", "MXTrain":
		case "MXTune":
			return nil, fmt.Errorf("%s: MXTune is TVM auto-tuning (TunerTracker, TunerServer and Tuner replicas), which mlkube does not run: an MXJob trains, with Scheduler, Server and Worker replicas", path)
		default:
			return nil, fmt.Errorf("%s: %q is not one of MXTrain, MXTune", path, mode)
		}
	}

	specs, ok, err := spec.object("mxReplicaSpecs")
	if err != nil {
		return nil, err
	}
	if !ok {
		if spec.has("replicaSpecs") {
			return nil, fmt.Errorf("spec.mxReplicaSpecs is missing; spec.replicaSpecs is the list form of fioravanzo.org/v1alpha1, kubeflow.org/v1alpha1 and mlkube.io/v1beta1 MXJob: set apiVersion to one of those")
		}
		return nil, fmt.Errorf("spec.mxReplicaSpecs is missing: a job needs at least one replica group")
	}
	keyOf := map[v1beta1.MXReplicaType]string{}
	for _, key := range specs.keys() {
		typ, ok := kubeflowMXType(key)
		switch {
		case !ok && isTuneType(key):
			return nil, fmt.Errorf("%s: %s is a replica of jobMode MXTune, TVM auto-tuning, which mlkube does not run: an MXJob trains, with Scheduler, Server and Worker replicas", specs.at(key), key)
		case !ok:
			return nil, fmt.Errorf("%s: %q is not one of Scheduler, Server, Worker", specs.at(key), key)
		}
		if other, dup := keyOf[typ]; dup {
			return nil, fmt.Errorf("%s: %s and %s name the same replica type; keep one", specs.path, other, key)
		}
		keyOf[typ] = key
	}
	var neverByDefault []string
	for _, kt := range kubeflowMXTypes {
		key, ok := keyOf[kt.typ]
		if !ok {
			continue
		}
		_, v, _, _ := specs.lookup(key)
		g, keep, defaulted, err := readKubeflowGroup(specs.at(key), v, "MXJob", w)
		if err != nil {
			return nil, err
		}
		if defaulted {
			neverByDefault = append(neverByDefault, specs.at(key))
		}
		if keep {
			job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, v1beta1.MXReplicaSpec{
				MXReplicaType: kt.typ,
				Replicas:      g.replicas,
				Port:          kubeflowPort(&g.template, v1beta1.MXContainerName, kubeflowMXPortName, v1beta1.DefaultMXPort),
				RestartPolicy: g.policy,
				Template:      g.template,
			})
		}
	}
	if len(job.Spec.ReplicaSpecs) == 0 {
		return nil, fmt.Errorf("%s: has no replica group with a replica to run", specs.path)
	}
	warnNeverByDefault(neverByDefault, w)

	if job.Spec.RunPolicy, err = kubeflowRunPolicy(spec, "MXJob", w); err != nil {
		return nil, err
	}
	w.dropped(spec.unread(), "today's MXJob has no such fields")
	w.dropped(doc.unread(), "an MXJob has no such top-level fields")
	checkMX(job, w)
	return &Result{Job: job, From: from, Warnings: *w}, nil
}

func kubeflowMXType(key string) (v1beta1.MXReplicaType, bool) {
	for _, kt := range kubeflowMXTypes {
		if strings.EqualFold(key, kt.key) {
			return kt.typ, true
		}
	}
	return "", false
}

func isTuneType(key string) bool {
	for _, t := range kubeflowMXTuneTypes {
		if strings.EqualFold(key, t) {
			return true
		}
	}
	return false
}
