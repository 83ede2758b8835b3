package convert

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The MXJob list form is that of the first MXNet operators, both made from the first TensorFlow
// operator's code: the fork for MXNet (fioravanzo.org/v1alpha1) and Kubeflow's mx-operator
// (kubeflow.org/v1alpha1). A replicaSpecs list of groups, each with an mxReplicaType
// (SCHEDULER, SERVER, WORKER), replicas (default 1), a port and a pod template whose container
// named mxnet gets the DMLC_* env. They differ in their defaults:
//
//   - The fork called the port mxPort (default 9000), and told each replica its own group's
//     mxPort as DMLC_PS_ROOT_PORT and replica 0 of the first group as DMLC_PS_ROOT_URI: it
//     worked when the SCHEDULER came first and every group had the same port. A group without
//     a type was the SCHEDULER, and the scheduler's exit ended the job.
//   - Kubeflow's called it PsRootPort (default 9091) and told every replica the SCHEDULER's. A
//     group without a type was a WORKER, and worker 0's exit ended the job. Its later versions
//     added cleanupPodPolicy and jobMode (dist, local).
//
// Every spelling of the port is read in every form (manifests were copied between the two),
// and today's MXJob is read the same way when it is not quite in today's form.

// An mxForm is one of the MXJob list forms: what it is and what its operator did by default.
type mxForm struct {
	// from names the form in Result.From.
	from string
	// operator names the old operator in warnings; "" for today's API.
	operator string
	// portKey is the form's name for the port; defaultPort its default.
	portKey     string
	defaultPort int32
	// defaultType is the type of a group without one; "" makes it an error.
	defaultType v1beta1.MXReplicaType
	// decider is the replica type whose replica 0 ended the job when terminationPolicy was unset.
	decider v1beta1.MXReplicaType
	// rootFromOwnGroup: each replica was told its own group's port as DMLC_PS_ROOT_PORT and
	// replica 0 of the first group as DMLC_PS_ROOT_URI (the fork).
	rootFromOwnGroup bool
}

var (
	fioravanzoForm = mxForm{
		from: "fioravanzo.org/v1alpha1 MXJob", operator: "the fork",
		portKey: "mxPort", defaultPort: 9000, defaultType: v1beta1.MXReplicaScheduler,
		decider: v1beta1.MXReplicaScheduler, rootFromOwnGroup: true,
	}
	kubeflowMXForm = mxForm{
		from: "kubeflow.org/v1alpha1 MXJob", operator: "Kubeflow's v1alpha1 operator",
		portKey: "PsRootPort", defaultPort: 9091, defaultType: v1beta1.MXReplicaWorker,
		decider: v1beta1.MXReplicaWorker,
	}
	mlkubeMXForm = mxForm{
		from:    "mlkube.io/v1beta1 MXJob (not in today's form)",
		portKey: "port", defaultPort: v1beta1.DefaultMXPort, decider: v1beta1.MXReplicaScheduler,
	}
)

// portKeys are every spelling of the port, today's first.
var portKeys = []string{"port", "mxPort", "PsRootPort", "psRootPort"}

func fromMXList(docMap map[string]any, form mxForm) (*Result, error) {
	w := &warnings{}
	if form.operator == "" {
		w.add("converted %s to today's form: keep the converted manifest in place of this one", form.from)
	} else {
		w.add("converted from %s, an older API, to today's mlkube.io/v1beta1 MXJob: keep the converted manifest in place of the old one", form.from)
	}
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

	groups, groupsPath, ok, err := spec.list("replicaSpecs")
	if err != nil {
		return nil, err
	}
	if !ok {
		if spec.has("mxReplicaSpecs") {
			return nil, fmt.Errorf("spec.replicaSpecs is missing; spec.mxReplicaSpecs is the form of kubeflow.org/v1 MXJob: set apiVersion: kubeflow.org/v1")
		}
		return nil, fmt.Errorf("spec.replicaSpecs is missing: a job needs at least one replica group")
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s: is empty: a job needs at least one replica group", groupsPath)
	}
	moved := map[corev1.RestartPolicy][]string{}
	var defaultPort []string
	var first v1beta1.MXReplicaType
	ports := map[int32][]string{} // port → groups, for the fork's DMLC_PS_ROOT_PORT
	for i, g := range groups {
		path := fmt.Sprintf("%s[%d]", groupsPath, i)
		r, keep, portDefaulted, err := mxListReplica(path, g, form, w)
		if err != nil {
			return nil, err
		}
		if p := takeRestartPolicy(&r.Template); p != "" {
			if r.RestartPolicy == "" {
				r.RestartPolicy = v1beta1.RestartPolicy(p)
				moved[p] = append(moved[p], path)
			} else if r.RestartPolicy != v1beta1.RestartPolicy(p) {
				w.add("dropped %s.template.spec.restartPolicy: %s: the group's restartPolicy (%s) sets every pod's", path, p, r.RestartPolicy)
			}
		}
		if portDefaulted {
			defaultPort = append(defaultPort, path)
		}
		if i == 0 {
			first = r.MXReplicaType
		}
		ports[r.Port] = append(ports[r.Port], string(r.MXReplicaType))
		if keep {
			job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, r)
		}
	}
	warnMoved(moved, w)
	if len(job.Spec.ReplicaSpecs) == 0 {
		return nil, fmt.Errorf("%s: every group has replicas: 0, which leaves a job of nothing to run", groupsPath)
	}
	if len(defaultPort) > 0 && form.defaultPort != v1beta1.DefaultMXPort {
		w.add("%s: no %s, so %d, %s default (today's MXJob's own is %d)", joinAnd(defaultPort), form.portKey, form.defaultPort, possessive(form.operator), v1beta1.DefaultMXPort)
	}
	if form.rootFromOwnGroup {
		if first != v1beta1.MXReplicaScheduler {
			w.add("%s told every replica that the scheduler was replica 0 of the first group (here %s) as DMLC_PS_ROOT_URI; "+
				"today's MXJob tells them the SCHEDULER's address, wherever the group is", form.operator, first)
		}
		if len(ports) > 1 {
			w.add("the groups have different ports (%s): %s told each replica its own group's %s as DMLC_PS_ROOT_PORT; "+
				"today's MXJob tells every replica the SCHEDULER's port", portList(ports), form.operator, form.portKey)
		}
	}

	if err := jobMode(spec, w); err != nil {
		return nil, err
	}
	if err := mxTerminationPolicy(spec, form, w); err != nil {
		return nil, err
	}
	if job.Spec.RunPolicy.CleanPodPolicy, err = listCleanPodPolicy(spec, "cleanupPodPolicy", "cleanPodPolicy"); err != nil {
		return nil, err
	}
	var templates []*corev1.PodTemplateSpec
	for i := range job.Spec.ReplicaSpecs {
		templates = append(templates, &job.Spec.ReplicaSpecs[i].Template)
	}
	if err := schedulerName(spec, templates, w); err != nil {
		return nil, err
	}
	if image, path, ok, err := spec.str("mxImage"); err != nil {
		return nil, err
	} else if ok && image != "" {
		w.add("dropped %s: %s: today's MXJob has no job-wide image; each group runs its template's", path, image)
	}
	if _, path, ok, err := spec.raw("RuntimeId", "runtimeId", "runtime_id"); err != nil {
		return nil, err
	} else if ok {
		w.add("dropped %s: the old operator made it up to name the job's resources; mlkube names them after the job", path)
	}
	w.dropped(spec.unread(), "today's MXJob has no such fields")
	w.dropped(doc.unread(), "an MXJob has no such top-level fields")
	checkMX(job, w)
	return &Result{Job: job, From: form.from, Warnings: *w}, nil
}

// mxListReplica reads one replica group of the MXJob list form. keep is false for a group of
// zero replicas; portDefaulted is true when the group had no port and got the form's default.
func mxListReplica(path string, v any, form mxForm, w *warnings) (r v1beta1.MXReplicaSpec, keep, portDefaulted bool, err error) {
	g, err := object(path, v)
	if err != nil {
		return r, false, false, err
	}
	typ, typPath, ok, err := g.str("mxReplicaType")
	if err != nil {
		return r, false, false, err
	}
	switch {
	case (!ok || typ == "") && form.defaultType == "":
		return r, false, false, fmt.Errorf("%s.mxReplicaType is missing: it is one of %s", path, mxTypeList())
	case !ok || typ == "":
		r.MXReplicaType = form.defaultType
		w.add("%s has no mxReplicaType: it is a %s, %s default", path, form.defaultType, possessive(form.operator))
	case isOneOfMX(v1beta1.MXReplicaType(typ)):
		r.MXReplicaType = v1beta1.MXReplicaType(typ)
	default:
		return r, false, false, fmt.Errorf("%s: %q is not one of %s", typPath, typ, mxTypeList())
	}

	replicas, _, ok, err := g.integer(0, math.MaxInt32, "replicas")
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		replicas = 1
	}
	r.Replicas = int32(replicas)

	port, _, ok, err := g.integer(1, 65535, portKeys...)
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		port, portDefaulted = int64(form.defaultPort), true
	}
	r.Port = int32(port)

	// No old operator had a restartPolicy here, but a manifest half-way to today's may.
	policy, policyPath, hasPolicy, err := g.str("restartPolicy")
	if err != nil {
		return r, false, false, err
	}
	if hasPolicy {
		if r.RestartPolicy, err = restartPolicy(policyPath, policy); err != nil {
			return r, false, false, err
		}
	}

	tmpl, tmplPath, ok, err := g.raw("template")
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		return r, false, false, fmt.Errorf("%s.template is missing: every replica group needs the pod it runs (the old MXJob operators required one too)", path)
	}
	if r.Template, err = podTemplate(tmplPath, tmpl, w); err != nil {
		return r, false, false, err
	}
	if p := r.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways && p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
		return r, false, false, fmt.Errorf("%s.spec.restartPolicy: %q is not one of Always, OnFailure, Never", tmplPath, p)
	}

	w.dropped(g.unread(), "today's MXJob replica groups have no such fields")
	if r.Replicas == 0 {
		w.add("%s (%s) has replicas: 0: left out, as today's MXJob runs at least one replica per group", path, r.MXReplicaType)
		return r, false, portDefaulted, nil
	}
	return r, true, portDefaulted, nil
}

// jobMode reads the jobMode of Kubeflow's later v1alpha1 operator: dist ran the job
// distributed, as every MXJob runs now; local ran a WORKER alone, without a scheduler.
func jobMode(spec *fields, w *warnings) error {
	mode, path, ok, err := spec.str("jobMode")
	if err != nil || !ok {
		return err
	}
	switch mode {
	case "", "dist":
		w.add("dropped %s: %s: every MXJob runs distributed, with its scheduler", path, orUnset(mode))
	case "local":
		w.add("dropped %s: local: it ran the WORKER alone, without a scheduler; today's MXJob always has a SCHEDULER group, "+
			"which the worker then trains with", path)
	default:
		return fmt.Errorf("%s: %q is not one of dist, local", path, mode)
	}
	return nil
}

// mxTerminationPolicy reads the choice of the replica whose exit ends the job. Today the
// SCHEDULER decides: MXNet's scheduler exits once every worker has finished.
func mxTerminationPolicy(spec *fields, form mxForm, w *warnings) error {
	tp, ok, err := spec.object("terminationPolicy")
	if err != nil {
		return err
	}
	if !ok {
		if form.decider != v1beta1.MXReplicaScheduler {
			w.add("%s ended the job when %s 0 exited (its default terminationPolicy); today's MXJob ends it when the SCHEDULER exits, "+
				"which MXNet's scheduler does once every worker has finished", form.operator, form.decider)
		}
		return nil
	}
	chief, ok, err := tp.object("chief")
	if err != nil {
		return err
	}
	w.dropped(tp.unread(), "today's MXJob has no such fields")
	if !ok {
		return nil
	}
	name, _, _, err := chief.str("replicaName")
	if err != nil {
		return err
	}
	index, _, _, err := chief.integer(0, math.MaxInt32, "replicaIndex")
	if err != nil {
		return err
	}
	w.dropped(chief.unread(), "today's MXJob has no such fields")
	if strings.EqualFold(name, string(v1beta1.MXReplicaScheduler)) && index == 0 {
		return nil // what today's MXJob does anyway
	}
	w.add("%s names %s %d as the replica whose exit ends the job, which today's MXJob cannot express: the SCHEDULER decides "+
		"(MXNet's scheduler exits once every worker has finished)", chief.path, orUnset(name), index)
	return nil
}

func isOneOfMX(t v1beta1.MXReplicaType) bool {
	for _, u := range mxReplicaTypes {
		if t == u {
			return true
		}
	}
	return false
}

// possessive is "the fork's"; "" (today's API) is "today's".
func possessive(operator string) string {
	if operator == "" {
		return "today's"
	}
	return operator + "'s"
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
