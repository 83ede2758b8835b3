package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The replica list form is the spec.replicaSpecs list of groups, each naming its type, that
// today's API has and the first operators had before Kubeflow keyed the groups by type: the
// TfJob of the first TensorFlow operator (mlkube.io/v1beta1 of 2017, snake_case then camelCase)
// and its successors (tensorflow.org/v1alpha1, kubeflow.org/v1alpha1), and the MXJob of the
// first MXNet operators, both made from its code (the fork's fioravanzo.org/v1alpha1 and
// Kubeflow's kubeflow.org/v1alpha1). A manifest of today's API that leans on an old default
// (a group without a type, replicas: 0, a restartPolicy in the pod template) or carries fields
// today's kind lacks is read the same way. One reader reads them all; listKind and listForm
// say what differs.

// listKind is a kind's list form: the keys its manifests spelled and the APIs that wrote it.
// The replica types are today's, spelled the same: the CRD says which there are.
type listKind struct {
	keys  listKeys
	forms []listForm
	// defaultTemplate runs a group that has no template, as an old operator did (TfJob's PS);
	// nil, or false from it, makes a missing template an error, missingTemplate saying why.
	defaultTemplate func(r *listRead, path string, g *replicaGroup) bool
	missingTemplate string
	// extra reads the spec fields only this kind's list form had (MXJob's jobMode).
	extra func(r *listRead) error
	// todays: a manifest of today's API that is not quite in today's form is read in the list
	// form too (kinds adds the kind's todaysForm to forms).
	todays bool
}

// listKeys are a list form's spellings of its keys. The first is today's, or the camelCase of
// 2017; a second is the snake_case of 2017 (the other spellings of the port are the forms').
// The table in kinds.go leaves out today's keys of a group's type and port: kinds puts the
// kind's own (v1beta1.Kind.TypeField and PortField) first.
type listKeys struct {
	specs, typ, port []string
	// image is the job-wide image (tfImage), which ran what had no template of its own.
	image []string
	// terminationPolicy and its chief's replicaName and replicaIndex chose the replica whose
	// exit ended the job.
	terminationPolicy, replicaName, replicaIndex []string
	// ignored are group keys of the old operators' own bookkeeping.
	ignored []string
}

// listForm is one API that wrote a kind's list form, and what its operator did by default.
type listForm struct {
	// apiVersion and kind are the form's (kind is matched without regard to case);
	// snakeCase: the form is that of manifests with snake_case keys (mlkube.io's of 2017).
	apiVersion, kind string
	snakeCase        bool
	// from names the form in Result.From.
	from string
	// operator names the old operator in warnings; "" for today's API.
	operator string
	// defaultType is the type of a group without one; "" makes it an error.
	defaultType string
	// portKey is the form's name for the port, defaultPort its operator's default.
	portKey     string
	defaultPort int32
	// decider is the type whose replica 0 ended the job when no terminationPolicy said; ""
	// when it was today's.
	decider string
	// warn adds the form's own warnings about the converted job (the fork's DMLC_PS_ROOT_*).
	warn func(r *listRead)
}

// todaysForm is the list form of today's API for a kind, read when a manifest is not quite in
// today's form.
func todaysForm(k *v1beta1.Kind) listForm {
	return listForm{
		apiVersion: v1beta1.GroupVersion.String(), kind: k.Name,
		from:    v1beta1.GroupVersion.String() + " " + k.Name + " (not in today's form)",
		portKey: k.PortField, defaultPort: k.DefaultPort,
	}
}

// listRead is one conversion from the list form under way.
type listRead struct {
	kind   *jobKind
	form   *listForm
	spec   *fields
	groups []replicaGroup // kept, in the manifest's order
	w      *warnings
	// image is the job-wide image, at imagePath; usedBy says what runs it.
	image, imagePath string
	usedBy           []string
	// snake: the manifest spells its keys the 2017 snake_case way (replica_specs).
	snake bool
}

func fromList(docMap map[string]any, k *jobKind, form *listForm) (*Result, error) {
	w := &warnings{}
	if form.operator == "" {
		w.add("converted %s to today's form: keep the converted manifest in place of this one", form.from)
	} else {
		w.add("converted from %s, an older API, to today's %s %s: keep the converted manifest in place of the old one", form.from, v1beta1.GroupVersion, k.Name)
	}
	doc, meta, spec, err := readJob(docMap, w)
	if err != nil {
		return nil, err
	}
	r := &listRead{kind: k, form: form, spec: spec, w: w}
	keys := k.list.keys

	if r.image, r.imagePath, _, err = spec.str(keys.image...); err != nil {
		return nil, err
	}
	groups, groupsPath, ok, err := spec.list(keys.specs...)
	if err != nil {
		return nil, err
	}
	if !ok {
		if kf := k.kubeflow; kf != nil && spec.has(kf.specsKey) {
			return nil, fmt.Errorf("spec.%s is missing; spec.%s is the form of kubeflow.org/v1 %s: set apiVersion: kubeflow.org/v1 and kind: %s",
				keys.specs[0], kf.specsKey, kf.kind, kf.kind)
		}
		return nil, fmt.Errorf("spec.%s is missing: a job needs at least one replica group", keys.specs[0])
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s: is empty: a job needs at least one replica group", groupsPath)
	}
	r.snake = len(keys.specs) > 1 && groupsPath == spec.at(keys.specs[1])
	moved := map[corev1.RestartPolicy][]string{} // policy moved from the pod template → groups
	var defaultPort []string
	for i, v := range groups {
		path := fmt.Sprintf("%s[%d]", groupsPath, i)
		g, keep, portDefaulted, err := r.group(path, v)
		if err != nil {
			return nil, err
		}
		if p := takeRestartPolicy(&g.template); p != "" {
			if g.policy == "" {
				g.policy = v1beta1.RestartPolicy(p)
				g.came("restartPolicy", g.from["template"]+".spec.restartPolicy")
				moved[p] = append(moved[p], path)
			} else if g.policy != v1beta1.RestartPolicy(p) {
				w.add("dropped %s.template.spec.restartPolicy: %s: the group's restartPolicy (%s) sets every pod's", path, p, g.policy)
			}
		}
		if portDefaulted {
			defaultPort = append(defaultPort, path)
		}
		if keep {
			r.groups = append(r.groups, g)
		}
	}
	warnMoved(moved, w)
	if len(r.groups) == 0 {
		return nil, fmt.Errorf("%s: every group has replicas: 0, which leaves a job of nothing to run", groupsPath)
	}
	if len(defaultPort) > 0 && form.defaultPort != k.DefaultPort {
		w.add("%s: no %s, so %d, %s default (today's %s's own is %d)", joinAnd(defaultPort), form.portKey, form.defaultPort, possessive(form.operator), k.Name, k.DefaultPort)
	}
	if form.warn != nil {
		form.warn(r)
	}

	extra, o := map[string]any{}, origins{}
	if k.tensorboard {
		tb, err := listTensorboard(spec, o)
		if err != nil {
			return nil, err
		}
		if tb != nil {
			if tb.image == "" && r.image != "" {
				tb.image = r.image
				r.usedBy = append(r.usedBy, "TensorBoard")
			}
			extra["tensorboard"] = tb.spec()
			w.dropped(tb.dropped, fmt.Sprintf("today's %s has no such TensorBoard fields", k.Name))
		}
	}
	switch {
	case r.image == "":
	case len(r.usedBy) > 0:
		w.add("%s (%s) runs %s, as it did", r.imagePath, r.image, joinAnd(r.usedBy))
	default:
		w.add("dropped %s: %s: today's %s has no job-wide image; each group runs its template's", r.imagePath, r.image, k.Name)
	}
	if k.list.extra != nil {
		if err := k.list.extra(r); err != nil {
			return nil, err
		}
	}
	if err := r.terminationPolicy(); err != nil {
		return nil, err
	}
	if extra["runPolicy"], err = runPolicy(spec, k, w, o); err != nil {
		return nil, err
	}
	if err := schedulerName(spec, r.groups, w); err != nil {
		return nil, err
	}
	if _, path, ok, err := spec.raw("RuntimeId", "runtimeId", "runtime_id"); err != nil {
		return nil, err
	} else if ok {
		w.add("dropped %s: the old operator made it up to name the job's resources; mlkube names them after the job", path)
	}
	return finish(k, doc, spec, meta, r.groups, extra, o, form.from, w)
}

// group reads one replica group of the list form. keep is false for a group of zero replicas,
// which today's kinds cannot hold; portDefaulted is true when the group had no port and got
// the form's default.
func (r *listRead) group(path string, v any) (g replicaGroup, keep, portDefaulted bool, err error) {
	f, err := object(path, v)
	if err != nil {
		return g, false, false, err
	}
	k, list, form, keys := r.kind, &r.kind.list, r.form, r.kind.list.keys
	g.path = path
	typ, typPath, ok, err := f.str(keys.typ...)
	if err != nil {
		return g, false, false, err
	}
	switch {
	case (!ok || typ == "") && form.defaultType == "":
		// Not the CRD's to say: a group is named by its type, and today's job cannot hold one
		// without (it would be read as this form again, never as today's).
		return g, false, false, fmt.Errorf("%s.%s is missing: it is one of %s", path, keys.typ[0], strings.Join(k.Types, ", "))
	case !ok || typ == "":
		g.typ = form.defaultType
		key := keys.typ[0]
		if r.snake {
			key = keys.typ[len(keys.typ)-1]
		}
		r.w.add("%s has no %s: it is a %s, %s default", path, key, g.typ, possessive(form.operator))
	default:
		g.typ = typ
		g.came(k.TypeField, typPath)
	}

	// No old operator had a restartPolicy in a group, but a manifest half-way to today's may.
	if err := g.readCommon(f, k); err != nil {
		return g, false, false, err
	}
	g.port, portDefaulted = form.defaultPort, true
	if port, portPath, ok, err := f.integer(keys.port...); err != nil {
		return g, false, false, err
	} else if ok {
		if g.port, err = k.int32Field(port, portPath, "spec.replicaSpecs[0]."+k.PortField, true); err != nil {
			return g, false, false, err
		}
		portDefaulted = false
		g.came(k.PortField, portPath)
	}
	f.lookup(keys.ignored...)

	tmpl, tmplPath, ok, err := f.raw("template")
	if err != nil {
		return g, false, false, err
	}
	switch {
	case ok:
		if g.template, err = podTemplate(tmplPath, tmpl, r.w); err != nil {
			return g, false, false, err
		}
		g.came("template", tmplPath)
	case list.defaultTemplate != nil && list.defaultTemplate(r, path, &g):
	default:
		return g, false, false, fmt.Errorf("%s.template is missing: %s", path, list.missingTemplate)
	}

	r.w.dropped(f.unread(), fmt.Sprintf("today's %s replica groups have no such fields", r.kind.Name))
	if g.replicas == 0 {
		r.w.add("%s (%s) has replicas: 0: left out, as today's %s runs at least one replica per group", path, g.typ, r.kind.Name)
		return g, false, portDefaulted, nil
	}
	return g, true, portDefaulted, nil
}

// terminationPolicy reads the choice of the replica whose exit ends the job, which today's
// kinds fix (the kind's deciders), and says when the old choice, or the old default, differs.
func (r *listRead) terminationPolicy() error {
	k, keys := r.kind, r.kind.list.keys
	var groups []v1beta1.ReplicaGroup
	for _, g := range r.groups {
		groups = append(groups, v1beta1.ReplicaGroup{Type: g.typ})
	}
	decider := k.Decider(groups)
	tp, ok, err := r.spec.object(keys.terminationPolicy...)
	if err != nil || len(keys.terminationPolicy) == 0 {
		return err
	}
	if !ok {
		if r.form.decider != "" && r.form.decider != decider {
			r.w.add("%s ended the job when %s 0 exited (its default terminationPolicy), which today's %s cannot express: %s%s",
				r.form.operator, r.form.decider, k.Name, k.decides, r.now(decider))
		}
		return nil
	}
	chief, ok, err := tp.object("chief")
	if err != nil {
		return err
	}
	r.w.dropped(tp.unread(), fmt.Sprintf("today's %s has no such fields", k.Name))
	if !ok {
		return nil
	}
	name, _, _, err := chief.str(keys.replicaName...)
	if err != nil {
		return err
	}
	index, _, _, err := chief.integer(keys.replicaIndex...)
	if err != nil {
		return err
	}
	r.w.dropped(chief.unread(), fmt.Sprintf("today's %s has no such fields", k.Name))
	if decider != "" && strings.EqualFold(name, decider) && index == 0 {
		return nil // what today's kind does anyway
	}
	r.w.add("%s names %s %d as the replica whose exit ends the job, which today's %s cannot express: %s%s%s",
		chief.path, orUnset(name), index, k.Name, k.decides, r.now(decider), k.advice)
	return nil
}

// now says which replica decides the converted job, where the kind's rule has a choice.
func (r *listRead) now(decider string) string {
	switch {
	case len(r.kind.Deciders) < 2:
		return ""
	case decider == "":
		return " (no group can decide as the job stands)"
	}
	return fmt.Sprintf(" (here %s 0)", decider)
}

// warnMoved tells of the restartPolicy values moved from pod templates to their groups. The
// old operators ran each replica as a batch Job, which needed one in the template; mlkube reads
// the group's and sets every pod's from it. A value no pod takes (ExitCode, or one misspelt)
// moves as it is: the group's is the CRD's to judge.
func warnMoved(moved map[corev1.RestartPolicy][]string, w *warnings) {
	order := []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways, corev1.RestartPolicyNever}
	for _, p := range slices.Sorted(maps.Keys(moved)) {
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
	}
	for _, p := range order {
		groups := moved[p]
		if len(groups) == 0 {
			continue
		}
		note := ""
		if p == corev1.RestartPolicyOnFailure || p == corev1.RestartPolicyAlways {
			note = fmt.Sprintf(". Under %s the kubelet restarts a failed container in place, each restart counted against backoffLimit; "+
				"the old operator's reading of exit codes (1-127 permanent, 128-255 retried) is restartPolicy: ExitCode", p)
		}
		w.add("%s: moved restartPolicy: %s from the pod template to the replica group, which mlkube reads (it sets every pod's)%s",
			joinAnd(groups), p, note)
	}
}

// readCommon reads what a replica group of kind k has in every form: replicas (1 when unset;
// 0 is for the reader to leave out) and a restartPolicy, spelled as today's (Kubeflow's were).
func (g *replicaGroup) readCommon(f *fields, k *jobKind) error {
	g.replicas = 1
	if n, path, ok, err := f.integer("replicas"); err != nil {
		return err
	} else if ok {
		if g.replicas, err = k.int32Field(n, path, "spec.replicaSpecs[0].replicas", false); err != nil {
			return err
		}
		g.came("replicas", path)
	}
	policy, path, ok, err := f.str("restartPolicy")
	if err != nil || !ok {
		return err
	}
	g.policy = v1beta1.RestartPolicy(policy)
	g.came("restartPolicy", path)
	return nil
}

// schedulerName moves kubeflow.org/v1alpha1's job-wide schedulerName into every pod template,
// where Kubernetes reads it.
func schedulerName(spec *fields, groups []replicaGroup, w *warnings) error {
	name, path, ok, err := spec.str("schedulerName")
	if err != nil || !ok || name == "" {
		return err
	}
	for i := range groups {
		if t := &groups[i].template; t.Spec.SchedulerName == "" {
			t.Spec.SchedulerName = name
		}
	}
	w.add("%s: set schedulerName: %s in every replica group's pod template, where Kubernetes reads it", path, name)
	return nil
}

// possessive is "the fork's" or "the old operators'"; "" (today's API) is "today's".
func possessive(operator string) string {
	switch {
	case operator == "":
		return "today's"
	case strings.HasSuffix(operator, "s"):
		return operator + "'"
	}
	return operator + "'s"
}
