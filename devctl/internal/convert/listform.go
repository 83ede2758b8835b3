package convert

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The replica list form is the TfJob of the first TensorFlow operator and its successors until
// Kubeflow's v1alpha2: mlkube.io/v1beta1 (2017, snake_case then camelCase),
// tensorflow.org/v1alpha1 and kubeflow.org/v1alpha1. Manifests of that time mixed the spellings
// (Kubeflow's own README had replica_specs beside tfPort), so every spelling is read everywhere.
//
// The old operators' defaults (their SetDefaults_TfJob): a group without tfReplicaType is the
// MASTER, replicas is 1, tfPort is 2222, and a PS group without a template runs TensorFlow's
// standard server in spec.tfImage. The type list was MASTER, WORKER and PS.

// oldReplicaTypes are the types of the replica list form.
var oldReplicaTypes = []v1beta1.TfReplicaType{v1beta1.TfReplicaMaster, v1beta1.TfReplicaWorker, v1beta1.TfReplicaPS}

func fromReplicaList(docMap map[string]any, from string) (*Result, error) {
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

	tfImage, tfImagePath, hasTfImage, err := spec.str("tfImage", "tf_image")
	if err != nil {
		return nil, err
	}
	psImage := DefaultPSImage
	if hasTfImage && tfImage != "" {
		psImage = tfImage
	}

	groups, groupsPath, ok, err := spec.list("replicaSpecs", "replica_specs")
	if err != nil {
		return nil, err
	}
	if !ok {
		if spec.has("tfReplicaSpecs") {
			return nil, fmt.Errorf("spec.replicaSpecs is missing; spec.tfReplicaSpecs is the form of kubeflow.org/v1 TFJob: set apiVersion: kubeflow.org/v1 and kind: TFJob")
		}
		return nil, fmt.Errorf("spec.replicaSpecs is missing: a job needs at least one replica group")
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s: is empty: a job needs at least one replica group", groupsPath)
	}
	defaultPS := false
	moved := map[corev1.RestartPolicy][]string{} // policy moved from the pod template → groups
	for i, g := range groups {
		path := fmt.Sprintf("%s[%d]", groupsPath, i)
		r, keep, isDefaultPS, err := listReplica(path, g, psImage, w)
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
		defaultPS = defaultPS || isDefaultPS
		if keep {
			job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, r)
		}
	}
	warnMoved(moved, w)
	if len(job.Spec.ReplicaSpecs) == 0 {
		return nil, fmt.Errorf("%s: every group has replicas: 0, which leaves a job of nothing to run", groupsPath)
	}

	tb, err := listTensorboard(spec)
	if err != nil {
		return nil, err
	}
	if tb != nil && tb.image == "" && hasTfImage && tfImage != "" {
		tb.image = tfImage
		tb.fromTfImage = true
	}
	if tb != nil {
		job.Spec.Tensorboard = tb.spec()
		w.dropped(tb.dropped, "today's TfJob has no such TensorBoard fields")
	}
	if hasTfImage {
		switch uses := tfImageUses(defaultPS, tb != nil && tb.fromTfImage); uses {
		case "":
			w.add("dropped %s: no PS group without a template and no TensorBoard uses it", tfImagePath)
		default:
			w.add("%s (%s) runs %s, as it did", tfImagePath, tfImage, uses)
		}
	}

	if err := terminationPolicy(spec, job, w); err != nil {
		return nil, err
	}
	if job.Spec.RunPolicy.CleanPodPolicy, err = listCleanPodPolicy(spec, "cleanPodPolicy"); err != nil {
		return nil, err
	}
	var templates []*corev1.PodTemplateSpec
	for i := range job.Spec.ReplicaSpecs {
		templates = append(templates, &job.Spec.ReplicaSpecs[i].Template)
	}
	if err := schedulerName(spec, templates, w); err != nil {
		return nil, err
	}
	if _, path, ok, err := spec.raw("RuntimeId", "runtimeId", "runtime_id"); err != nil {
		return nil, err
	} else if ok {
		w.add("dropped %s: the old operator made it up to name the job's resources; mlkube names them after the job", path)
	}
	w.dropped(spec.unread(), "today's TfJob has no such fields")
	w.dropped(doc.unread(), "a TfJob has no such top-level fields")
	check(job, w)
	return &Result{Job: job, From: from, Warnings: *w}, nil
}

// listReplica reads one replica group of the list form. keep is false for a group of zero
// replicas, which today's TfJob cannot hold; defaultPS is true when the group got the standard
// TensorFlow server for want of a template.
func listReplica(path string, v any, psImage string, w *warnings) (r v1beta1.TfReplicaSpec, keep, defaultPS bool, err error) {
	g, err := object(path, v)
	if err != nil {
		return r, false, false, err
	}
	typ, typPath, ok, err := g.str("tfReplicaType", "tf_replica_type")
	if err != nil {
		return r, false, false, err
	}
	switch {
	case !ok || typ == "":
		r.TfReplicaType = v1beta1.TfReplicaMaster
		key := "tfReplicaType"
		if strings.Contains(path, "replica_specs") {
			key = "tf_replica_type"
		}
		w.add("%s has no %s: it is a MASTER, the old operators' default", path, key)
	case isOneOf(v1beta1.TfReplicaType(typ), oldReplicaTypes):
		r.TfReplicaType = v1beta1.TfReplicaType(typ)
	default:
		return r, false, false, fmt.Errorf("%s: %q is not one of %s", typPath, typ, typeList(oldReplicaTypes))
	}

	replicas, _, ok, err := g.integer(0, math.MaxInt32, "replicas")
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		replicas = 1
	}
	r.Replicas = int32(replicas)

	port, _, ok, err := g.integer(1, 65535, "tfPort", "tf_port")
	if err != nil {
		return r, false, false, err
	}
	if !ok {
		port = int64(v1beta1.DefaultTfPort)
	}
	r.TfPort = int32(port)

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
	g.lookup("IsDefaultPS", "isDefaultPS", "is_default_ps") // the old operator's own bookkeeping

	tmpl, tmplPath, ok, err := g.raw("template")
	if err != nil {
		return r, false, false, err
	}
	switch {
	case ok:
		if r.Template, err = podTemplate(tmplPath, tmpl, w); err != nil {
			return r, false, false, err
		}
		if p := r.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways && p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
			return r, false, false, fmt.Errorf("%s.spec.restartPolicy: %q is not one of Always, OnFailure, Never", tmplPath, p)
		}
	case r.TfReplicaType == v1beta1.TfReplicaPS:
		r.Template = defaultPSTemplate(psImage)
		defaultPS = true
		if r.RestartPolicy == "" {
			r.RestartPolicy = v1beta1.RestartPolicyOnFailure // the old default PS pod's
		}
		w.add("%s (PS) has no template: it runs TensorFlow's standard server, as the old operator did "+
			"(container tensorflow, image %s, `python -c` on a script that serves this replica's task from TF_CONFIG, restartPolicy %s); "+
			"a cluster that cannot pull that image, such as devctl's offline kind cluster, needs a template of the group's own",
			path, psImage, r.RestartPolicy)
	default:
		return r, false, false, fmt.Errorf("%s.template is missing: only a PS group may leave it out (it then runs TensorFlow's standard server)", path)
	}

	w.dropped(g.unread(), "today's TfJob replica groups have no such fields")
	if r.Replicas == 0 {
		w.add("%s (%s) has replicas: 0: left out, as today's TfJob runs at least one replica per group", path, r.TfReplicaType)
		return r, false, defaultPS, nil
	}
	return r, true, defaultPS, nil
}

// warnMoved tells of the restartPolicy values moved from pod templates to their groups. The
// old operators ran each replica as a batch Job, which needed one in the template; mlkube reads
// the group's and sets every pod's from it.
func warnMoved(moved map[corev1.RestartPolicy][]string, w *warnings) {
	for _, p := range []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways, corev1.RestartPolicyNever} {
		groups := moved[p]
		if len(groups) == 0 {
			continue
		}
		note := ""
		if p != corev1.RestartPolicyNever {
			note = fmt.Sprintf(". Under %s the kubelet restarts a failed container in place, each restart counted against backoffLimit; "+
				"the old operator's reading of exit codes (1-127 permanent, 128-255 retried) is restartPolicy: ExitCode", p)
		}
		w.add("%s: moved restartPolicy: %s from the pod template to the replica group, which mlkube reads (it sets every pod's)%s",
			joinAnd(groups), p, note)
	}
}

// restartPolicy reads a replica group's restartPolicy, as today's TfJob and Kubeflow spell it,
// or a pod's (Always, OnFailure, Never).
func restartPolicy(path, s string) (v1beta1.RestartPolicy, error) {
	switch p := v1beta1.RestartPolicy(s); p {
	case v1beta1.RestartPolicyExitCode, v1beta1.RestartPolicyOnFailure, v1beta1.RestartPolicyNever, v1beta1.RestartPolicyAlways:
		return p, nil
	}
	return "", fmt.Errorf("%s: %q is not one of ExitCode, OnFailure, Never, Always", path, s)
}

// listCleanPodPolicy reads kubeflow.org/v1alpha1's cleanPodPolicy (CleanAll, CleanRunning,
// CleanNone; the later names are taken too), under one of names; "" when unset.
func listCleanPodPolicy(spec *fields, names ...string) (v1beta1.CleanPodPolicy, error) {
	s, path, ok, err := spec.str(names...)
	if err != nil || !ok {
		return "", err
	}
	return cleanPodPolicy(path, s)
}

func cleanPodPolicy(path, s string) (v1beta1.CleanPodPolicy, error) {
	switch strings.TrimPrefix(s, "Clean") {
	case "All":
		return v1beta1.CleanPodPolicyAll, nil
	case "Running":
		return v1beta1.CleanPodPolicyRunning, nil
	case "None":
		return v1beta1.CleanPodPolicyNone, nil
	}
	return "", fmt.Errorf("%s: %q is not one of All, Running, None", path, s)
}

// schedulerName moves kubeflow.org/v1alpha1's job-wide schedulerName into every pod template,
// where Kubernetes reads it.
func schedulerName(spec *fields, templates []*corev1.PodTemplateSpec, w *warnings) error {
	name, path, ok, err := spec.str("schedulerName")
	if err != nil || !ok || name == "" {
		return err
	}
	for _, t := range templates {
		if t.Spec.SchedulerName == "" {
			t.Spec.SchedulerName = name
		}
	}
	w.add("%s: set schedulerName: %s in every replica group's pod template, where Kubernetes reads it", path, name)
	return nil
}

func isOneOf(t v1beta1.TfReplicaType, types []v1beta1.TfReplicaType) bool {
	for _, u := range types {
		if t == u {
			return true
		}
	}
	return false
}

func typeList(types []v1beta1.TfReplicaType) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
