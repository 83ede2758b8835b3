package convert

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Kubeflow's jobs (kubeflow.org/v1alpha2 to v1: TFJob, MXJob, PyTorchJob) key their replica
// groups by type in spec.<framework>ReplicaSpecs, and share their defaults (SetDefaults_*):
// replicas 1, a restartPolicy per kind (Never; OnFailure for PyTorchJob), and the port of the
// framework container's port of a given name (tfjob-port, ...), else the kind's default. Type
// keys are matched without regard to case, as Kubeflow's defaulting did. The run policy is
// spec.runPolicy, or its fields at the top of the spec before Kubeflow grouped them. One reader
// reads every kind; kubeflowKind says what differs.

// kubeflowKind is Kubeflow's form of a kind.
type kubeflowKind struct {
	// kind is Kubeflow's name of the kind (TFJob), versions the API versions of this form.
	kind     string
	versions []string
	// specsKey is the key of the replica groups: tfReplicaSpecs.
	specsKey string
	// types are Kubeflow's replica types, in the order the converted job lists them.
	types []kubeflowType
	// portName names the framework container's port that Kubeflow took the port from; port is
	// Kubeflow's default port (Kubeflow's own: that today's kind has the same is no matter here).
	portName string
	port     int32
	// restartPolicy is Kubeflow's default for a group without one.
	restartPolicy v1beta1.RestartPolicy
	// dropped are the spec fields of Kubeflow's kind that today's has no equivalent of.
	dropped []droppedField
	// checkSpec refuses what the kind's spec says that mlkube cannot run (MXJob's jobMode).
	checkSpec func(spec *fields) error
	// otherMode are replica types of a mode of the kind that mlkube does not run, and why.
	otherMode otherMode
}

// kubeflowType maps one of Kubeflow's replica types (its key) to today's type.
type kubeflowType struct{ key, typ string }

type otherMode struct {
	types []string
	why   string
}

// droppedField is a field Kubeflow's kind had and today's has no equivalent of: a conversion
// drops it, saying why. kind is the type its value must have ("string", "bool"; "" for any);
// false and "" drop nothing a person would miss.
type droppedField struct {
	key, kind, why string
}

func fromKubeflow(docMap map[string]any, k *jobKind, from string) (*Result, error) {
	kf := k.kubeflow
	w := &warnings{}
	w.add("converted from %s, an older API, to today's %s %s: keep the converted manifest in place of the old one", from, v1beta1.GroupVersion, k.Name)
	doc, meta, spec, err := readJob(docMap, w)
	if err != nil {
		return nil, err
	}
	if kf.checkSpec != nil {
		if err := kf.checkSpec(spec); err != nil {
			return nil, err
		}
	}

	specs, ok, err := spec.object(kf.specsKey)
	if err != nil {
		return nil, err
	}
	if !ok {
		if spec.has(k.list.keys.specs...) {
			return nil, fmt.Errorf("spec.%s is missing; spec.replicaSpecs is the list form of %s: %s", kf.specsKey, k.listAPIs(), k.setListAPI())
		}
		return nil, fmt.Errorf("spec.%s is missing: a job needs at least one replica group", kf.specsKey)
	}
	keyOf := map[string]string{}
	for _, key := range specs.keys() {
		typ, ok := kf.typeOf(key)
		switch {
		case !ok && slices.ContainsFunc(kf.otherMode.types, func(t string) bool { return strings.EqualFold(t, key) }):
			return nil, fmt.Errorf("%s: %s %s", specs.at(key), key, kf.otherMode.why)
		case !ok:
			keys := make([]string, len(kf.types))
			for i, t := range kf.types {
				keys[i] = t.key
			}
			return nil, fmt.Errorf("%s: %q is not one of %s", specs.at(key), key, strings.Join(keys, ", "))
		}
		if other, dup := keyOf[typ]; dup {
			return nil, fmt.Errorf("%s: %s and %s name the same replica type; keep one", specs.path, other, key)
		}
		keyOf[typ] = key
	}
	var groups []replicaGroup
	var byDefault []string
	for _, kt := range kf.types {
		key, ok := keyOf[kt.typ]
		if !ok {
			continue
		}
		_, v, _, _ := specs.lookup(key)
		g, keep, defaulted, err := readKubeflowGroup(specs.at(key), v, k, w)
		if err != nil {
			return nil, err
		}
		g.typ = kt.typ
		var portAt string
		if g.port, portAt = kubeflowPort(&g.template, k.Container, kf.portName, kf.port); portAt != "" {
			g.came(k.PortField, g.from["template"]+portAt)
		}
		if defaulted {
			byDefault = append(byDefault, specs.at(key))
		}
		if keep {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s: has no replica group with a replica to run", specs.path)
	}
	if len(byDefault) > 0 {
		w.add("%s: no restartPolicy, so %s, Kubeflow's default: %s "+
			"(mlkube's own default, ExitCode, would recreate pods that exit 128-255, such as preempted ones)",
			joinAnd(byDefault), kf.restartPolicy, policyEffect[kf.restartPolicy])
	}

	o := origins{}
	rp, err := runPolicy(spec, k, w, o)
	if err != nil {
		return nil, err
	}
	for _, d := range kf.dropped {
		if err := d.drop(spec, w); err != nil {
			return nil, err
		}
	}
	return finish(k, doc, spec, meta, groups, map[string]any{"runPolicy": rp}, o, from, w)
}

// policyEffect says what a restartPolicy does when the framework container fails.
var policyEffect = map[v1beta1.RestartPolicy]string{
	v1beta1.RestartPolicyNever:     "any failure fails the job",
	v1beta1.RestartPolicyOnFailure: "the kubelet restarts a failed container in place, each restart counted against backoffLimit",
}

func (kf *kubeflowKind) typeOf(key string) (string, bool) {
	for _, kt := range kf.types {
		if strings.EqualFold(key, kt.key) {
			return kt.typ, true
		}
	}
	return "", false
}

// listAPIs are the API versions of the kind's list form, for a message: "mlkube.io/v1beta1
// and tensorflow.org/v1alpha1 TfJob".
func (k *jobKind) listAPIs() string {
	var apis []string
	for _, f := range k.list.forms {
		if !slices.Contains(apis, f.apiVersion) {
			apis = append(apis, f.apiVersion)
		}
	}
	return joinAnd(apis) + " " + k.Name
}

// setListAPI says how to have a manifest read in the list form.
func (k *jobKind) setListAPI() string {
	if len(k.list.forms) == 1 {
		return "set apiVersion: " + k.list.forms[0].apiVersion
	}
	return "set apiVersion to one of those"
}

// readKubeflowGroup reads one of Kubeflow's replica groups of a job of kind k: replicas,
// restartPolicy and template, as every Kubeflow kind has them. keep is false for replicas: 0;
// byDefault is true when the group had no restartPolicy and got Kubeflow's.
func readKubeflowGroup(path string, v any, k *jobKind, w *warnings) (g replicaGroup, keep, byDefault bool, err error) {
	f, err := object(path, v)
	if err != nil {
		return g, false, false, err
	}
	g.path = path
	if err := g.readCommon(f, k); err != nil {
		return g, false, false, err
	}

	tmpl, tmplPath, ok, err := f.raw("template")
	if err != nil {
		return g, false, false, err
	}
	if !ok {
		return g, false, false, fmt.Errorf("%s.template is missing: every replica group needs the pod it runs", path)
	}
	if g.template, err = podTemplate(tmplPath, tmpl, w); err != nil {
		return g, false, false, err
	}
	g.came("template", tmplPath)
	// Kubeflow set every pod's restartPolicy from the group's (its default when unset), so one
	// in the template never took effect; keeping Kubeflow's behaviour means not moving it up.
	def := k.kubeflow.restartPolicy
	if p := takeRestartPolicy(&g.template); p != "" && v1beta1.RestartPolicy(p) != g.policy {
		has := fmt.Sprintf("%s, Kubeflow's default", def)
		if g.policy != "" {
			has = string(g.policy)
		}
		w.add("dropped %s.spec.restartPolicy: %s: it never took effect, as Kubeflow set every pod's restartPolicy from the replica group's (here %s); "+
			"set the group's restartPolicy to %s to have it", tmplPath, p, has, p)
	}
	if g.policy == "" {
		g.policy, byDefault = def, true
	}

	w.dropped(f.unread(), fmt.Sprintf("today's %s replica groups have no such fields", k.Name))
	if g.replicas == 0 {
		w.add("%s has replicas: 0: left out, as today's %s runs at least one replica per group", path, k.Name)
		return g, false, byDefault, nil
	}
	return g, true, byDefault, nil
}

// kubeflowPort is the port Kubeflow gave the framework: the port named portName of the
// container named container (tensorflow's tfjob-port, ...), with its path in the template
// (.spec.containers[0].ports[1].containerPort), else def. A port of 0 is one left unset; any
// other is the CRD's to judge.
func kubeflowPort(t *corev1.PodTemplateSpec, container, portName string, def int32) (int32, string) {
	for i, c := range t.Spec.Containers {
		if c.Name != container {
			continue
		}
		for j, p := range c.Ports {
			if p.Name == portName && p.ContainerPort != 0 {
				return p.ContainerPort, fmt.Sprintf(".spec.containers[%d].ports[%d].containerPort", i, j)
			}
		}
	}
	return def, ""
}

// drop reads the field from spec and, when it says something, warns that it is dropped.
func (d droppedField) drop(spec *fields, w *warnings) error {
	var value, path string
	switch d.kind {
	case "string":
		s, p, ok, err := spec.str(d.key)
		if err != nil || !ok || s == "" {
			return err
		}
		value, path = s, p
	case "bool":
		on, p, ok, err := spec.boolean(d.key)
		if err != nil || !ok || !on {
			return err
		}
		value, path = "true", p
	default:
		v, p, ok, err := spec.raw(d.key)
		if err != nil || !ok || isEmpty(v) {
			return err
		}
		path = p
		switch v := v.(type) {
		case string:
			value = v
		case map[string]any, []any: // too long to repeat
		default:
			value = describe(v)
		}
	}
	if value == "" {
		w.add("dropped %s: %s", path, d.why)
	} else {
		w.add("dropped %s: %s: %s", path, value, d.why)
	}
	return nil
}
