package convert

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Kubeflow's TFJob (kubeflow.org/v1alpha2 to v1) keys its replica groups by type in
// spec.tfReplicaSpecs. Its defaults (SetDefaults_TFJob): replicas 1, restartPolicy Never, the
// port of the tensorflow container's port named tfjob-port, else 2222. Type keys are matched
// without regard to case, as Kubeflow's defaulting did. Chief and Master mean the same: the
// replica that decides, else worker 0, which is mlkube's rule too.

// kubeflowTypes are Kubeflow's replica types, in the order the converted job lists them.
var kubeflowTypes = []struct {
	key string
	typ v1beta1.TfReplicaType
}{
	{"Chief", v1beta1.TfReplicaChief},
	{"Master", v1beta1.TfReplicaMaster},
	{"Worker", v1beta1.TfReplicaWorker},
	{"PS", v1beta1.TfReplicaPS},
	{"Evaluator", v1beta1.TfReplicaEvaluator},
}

// kubeflowPortName names the container port Kubeflow took the TensorFlow port from.
const kubeflowPortName = "tfjob-port"

func fromKubeflow(docMap map[string]any, from string) (*Result, error) {
	w := &warnings{}
	w.add("converted from %s, an older API, to today's mlkube.io/v1beta1 TfJob: keep the converted manifest in place of the old one", from)
	doc, err := object("", docMap)
	if err != nil {
		return nil, err
	}
	job, spec, err := newJob(doc, w)
	if err != nil {
		return nil, err
	}

	specs, ok, err := spec.object("tfReplicaSpecs")
	if err != nil {
		return nil, err
	}
	if !ok {
		if spec.has("replicaSpecs", "replica_specs") {
			return nil, fmt.Errorf("spec.tfReplicaSpecs is missing; spec.replicaSpecs is the list form of kubeflow.org/v1alpha1 and mlkube.io/v1beta1: set apiVersion to one of those")
		}
		return nil, fmt.Errorf("spec.tfReplicaSpecs is missing: a job needs at least one replica group")
	}
	keyOf := map[v1beta1.TfReplicaType]string{}
	for _, key := range specs.keys() {
		typ, ok := kubeflowType(key)
		if !ok {
			return nil, fmt.Errorf("%s: %q is not one of Chief, Master, Worker, PS, Evaluator", specs.at(key), key)
		}
		if other, dup := keyOf[typ]; dup {
			return nil, fmt.Errorf("%s: %s and %s name the same replica type; keep one", specs.path, other, key)
		}
		keyOf[typ] = key
	}
	var neverByDefault []string
	for _, kt := range kubeflowTypes {
		key, ok := keyOf[kt.typ]
		if !ok {
			continue
		}
		_, v, _, _ := specs.lookup(key)
		r, keep, defaulted, err := kubeflowReplica(specs.at(key), kt.typ, v, w)
		if err != nil {
			return nil, err
		}
		if defaulted {
			neverByDefault = append(neverByDefault, specs.at(key))
		}
		if keep {
			job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, r)
		}
	}
	if len(job.Spec.ReplicaSpecs) == 0 {
		return nil, fmt.Errorf("%s: has no replica group with a replica to run", specs.path)
	}
	warnNeverByDefault(neverByDefault, w)

	if job.Spec.RunPolicy, err = kubeflowRunPolicy(spec, "TfJob", w); err != nil {
		return nil, err
	}
	if s, path, ok, err := spec.str("successPolicy"); err != nil {
		return nil, err
	} else if ok && s != "" {
		w.add("dropped %s: %s: mlkube ends the job when its MASTER or CHIEF succeeds, or else worker 0; it cannot wait for every worker", path, s)
	}
	if on, path, ok, err := spec.boolean("enableDynamicWorker"); err != nil {
		return nil, err
	} else if ok && on {
		w.add("dropped %s: true: a TfJob's replica groups cannot change once it runs (every replica's TF_CONFIG names all the others)", path)
	}
	w.dropped(spec.unread(), "today's TfJob has no such fields")
	w.dropped(doc.unread(), "a TfJob has no such top-level fields")
	check(job, w)
	return &Result{Job: job, From: from, Warnings: *w}, nil
}

// warnNeverByDefault tells of the groups that got Kubeflow's restartPolicy, Never.
func warnNeverByDefault(groups []string, w *warnings) {
	if len(groups) > 0 {
		w.add("%s: no restartPolicy, so Never, Kubeflow's default: any failure fails the job "+
			"(mlkube's own default, ExitCode, would recreate pods that exit 128-255, such as preempted ones)", joinAnd(groups))
	}
}

func kubeflowType(key string) (v1beta1.TfReplicaType, bool) {
	for _, kt := range kubeflowTypes {
		if strings.EqualFold(key, kt.key) {
			return kt.typ, true
		}
	}
	return "", false
}

// kubeflowReplica reads one of Kubeflow's TFJob replica groups. keep is false for replicas: 0;
// neverByDefault is true when the group had no restartPolicy and got Kubeflow's.
func kubeflowReplica(path string, typ v1beta1.TfReplicaType, v any, w *warnings) (r v1beta1.TfReplicaSpec, keep, neverByDefault bool, err error) {
	r.TfReplicaType = typ
	g, keep, neverByDefault, err := readKubeflowGroup(path, v, "TfJob", w)
	if err != nil {
		return r, false, false, err
	}
	r.Replicas, r.RestartPolicy, r.Template = g.replicas, g.policy, g.template
	r.TfPort = kubeflowPort(&r.Template, v1beta1.TfContainerName, kubeflowPortName, v1beta1.DefaultTfPort)
	return r, keep, neverByDefault, nil
}

// kubeflowGroup is one of Kubeflow's replica groups (TFJob's or MXJob's), read.
type kubeflowGroup struct {
	replicas int32
	policy   v1beta1.RestartPolicy
	template corev1.PodTemplateSpec
}

// readKubeflowGroup reads one of Kubeflow's replica groups for today's kind (TfJob, MXJob):
// replicas, restartPolicy and template, as every Kubeflow job has them. keep is false for
// replicas: 0; neverByDefault is true when the group had no restartPolicy and got Kubeflow's.
func readKubeflowGroup(path string, v any, kind string, w *warnings) (r kubeflowGroup, keep, neverByDefault bool, err error) {
	g, err := object(path, v)
	if err != nil {
		return r, false, false, err
	}
	replicas, _, ok, err := g.integer(0, math.MaxInt32, "replicas")
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		replicas = 1
	}
	r.replicas = int32(replicas)

	policy, policyPath, hasPolicy, err := g.str("restartPolicy")
	if err != nil {
		return r, false, false, err
	}
	if hasPolicy {
		if r.policy, err = restartPolicy(policyPath, policy); err != nil {
			return r, false, false, err
		}
	}

	tmpl, tmplPath, ok, err := g.raw("template")
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		return r, false, false, fmt.Errorf("%s.template is missing: every replica group needs the pod it runs", path)
	}
	if r.template, err = podTemplate(tmplPath, tmpl, w); err != nil {
		return r, false, false, err
	}
	// Kubeflow set every pod's restartPolicy from the group's (Never when unset), so one in the
	// template never took effect; keeping Kubeflow's behaviour means not moving it up.
	if p := takeRestartPolicy(&r.template); p != "" && v1beta1.RestartPolicy(p) != r.policy {
		has := "Never, Kubeflow's default"
		if r.policy != "" {
			has = string(r.policy)
		}
		w.add("dropped %s.spec.restartPolicy: %s: it never took effect, as Kubeflow set every pod's restartPolicy from the replica group's (here %s); "+
			"set the group's restartPolicy to %s to have it", tmplPath, p, has, p)
	}
	if r.policy == "" {
		r.policy = v1beta1.RestartPolicyNever
		neverByDefault = true
	}

	w.dropped(g.unread(), fmt.Sprintf("today's %s replica groups have no such fields", kind))
	if r.replicas == 0 {
		w.add("%s has replicas: 0: left out, as today's %s runs at least one replica per group", path, kind)
		return r, false, neverByDefault, nil
	}
	return r, true, neverByDefault, nil
}

// kubeflowPort is the port Kubeflow gave the framework: the port named portName of the
// container named container (tensorflow's tfjob-port, mxnet's mxjob-port), else def.
func kubeflowPort(t *corev1.PodTemplateSpec, container, portName string, def int32) int32 {
	for _, c := range t.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == portName && p.ContainerPort > 0 {
				return p.ContainerPort
			}
		}
	}
	return def
}

// runPolicyFields are the fields of Kubeflow's runPolicy, also found at the top of the spec
// before Kubeflow grouped them (v1alpha2 to early v1).
type runPolicyFields struct {
	values map[string]any    // field name → value read
	paths  map[string]string // field name → where
}

func readRunPolicyFields(f *fields) (runPolicyFields, error) {
	rp := runPolicyFields{values: map[string]any{}, paths: map[string]string{}}
	if s, path, ok, err := f.str("cleanPodPolicy"); err != nil {
		return rp, err
	} else if ok {
		p, err := cleanPodPolicy(path, s)
		if err != nil {
			return rp, err
		}
		rp.values["cleanPodPolicy"], rp.paths["cleanPodPolicy"] = p, path
	}
	if n, path, ok, err := f.integer(0, math.MaxInt32, "backoffLimit"); err != nil {
		return rp, err
	} else if ok {
		rp.values["backoffLimit"], rp.paths["backoffLimit"] = int32(n), path
	}
	if n, path, ok, err := f.integer(1, math.MaxInt64, "activeDeadlineSeconds"); err != nil {
		return rp, err
	} else if ok {
		rp.values["activeDeadlineSeconds"], rp.paths["activeDeadlineSeconds"] = n, path
	}
	// v1alpha2 spelled it ttlSecondsAfterFinishing.
	if n, path, ok, err := f.integer(0, math.MaxInt32, "ttlSecondsAfterFinished", "ttlSecondsAfterFinishing"); err != nil {
		return rp, err
	} else if ok {
		rp.values["ttlSecondsAfterFinished"], rp.paths["ttlSecondsAfterFinished"] = int32(n), path
	}
	return rp, nil
}

// kubeflowRunPolicy reads spec.runPolicy and the older top-level fields it replaced, for a job
// of today's kind (TfJob, MXJob); where both are set, runPolicy wins, as it did in Kubeflow.
func kubeflowRunPolicy(spec *fields, kind string, w *warnings) (v1beta1.RunPolicy, error) {
	var out v1beta1.RunPolicy
	top, err := readRunPolicyFields(spec)
	if err != nil {
		return out, err
	}
	merged := runPolicyFields{values: maps.Clone(top.values), paths: maps.Clone(top.paths)}
	if rp, ok, err := spec.object("runPolicy"); err != nil {
		return out, err
	} else if ok {
		nested, err := readRunPolicyFields(rp)
		if err != nil {
			return out, err
		}
		names := make([]string, 0, len(nested.values))
		for name := range nested.values {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if old, both := top.values[name]; both && fmt.Sprint(old) != fmt.Sprint(nested.values[name]) {
				w.add("%s and %s disagree: took %s's %v", top.paths[name], nested.paths[name], nested.paths[name], nested.values[name])
			}
			merged.values[name], merged.paths[name] = nested.values[name], nested.paths[name]
		}
		if _, path, ok, _ := rp.raw("schedulingPolicy"); ok {
			w.add("dropped %s: mlkube does no gang scheduling; set a priorityClassName or schedulerName in the pod templates if you need one", path)
		}
		if on, path, ok, err := rp.boolean("suspend"); err != nil {
			return out, err
		} else if ok && on {
			w.add("dropped %s: true: a %s cannot be suspended; create it when it should run", path, kind)
		}
		if s, path, ok, err := rp.str("managedBy"); err != nil {
			return out, err
		} else if ok && s != "" {
			w.add("dropped %s: %s: the mlkube operator manages every %s", path, s, kind)
		}
		w.dropped(rp.unread(), "today's runPolicy has no such fields")
	}
	if v, ok := merged.values["cleanPodPolicy"]; ok {
		out.CleanPodPolicy = v.(v1beta1.CleanPodPolicy)
	}
	if v, ok := merged.values["backoffLimit"]; ok {
		n := v.(int32)
		out.BackoffLimit = &n
	}
	if v, ok := merged.values["activeDeadlineSeconds"]; ok {
		n := v.(int64)
		out.ActiveDeadlineSeconds = &n
	}
	if v, ok := merged.values["ttlSecondsAfterFinished"]; ok {
		n := v.(int32)
		out.TTLSecondsAfterFinished = &n
	}
	return out, nil
}
