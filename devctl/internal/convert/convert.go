// Package convert turns job manifests written for earlier TensorFlow, MXNet and PyTorch
// operators into today's mlkube.io/v1beta1 jobs, so that `devctl run` and `devctl convert`
// accept them. It reads two old forms, for every kind that had them (kinds.go has the table of
// what differs between kinds):
//
//   - The replica list form (listform.go): spec.replicaSpecs, a list of groups that each name
//     their type. For TfJob, mlkube.io/v1beta1 of 2017, the first TensorFlow operator
//     (tensorflow/k8s), in its snake_case form (replica_specs, tf_replica_type, tf_port,
//     tensor_board.log_dir) and its later camelCase form (replicaSpecs, tfImage, tensorboard);
//     tensorflow.org/v1alpha1 TfJob and kubeflow.org/v1alpha1 TFJob, its successors, which
//     added terminationPolicy, cleanPodPolicy and schedulerName. For MXJob,
//     fioravanzo.org/v1alpha1, the fork of that operator for MXNet, and kubeflow.org/v1alpha1,
//     Kubeflow's first MXNet operator, made from the same code (SCHEDULER, SERVER and WORKER
//     groups; mxPort, PsRootPort). And today's form of every kind, when a manifest leans on an
//     old default or has a field today's kind lacks.
//   - Kubeflow's form (kubeflow.go): kubeflow.org/v1 (and v1alpha2 to v1beta2) TFJob, MXJob and
//     PyTorchJob, whose spec.tfReplicaSpecs, mxReplicaSpecs or pytorchReplicaSpecs is a map keyed
//     by replica type (Chief, Master, Worker, PS, Evaluator; Scheduler, Server, Worker; Master,
//     Worker), with runPolicy or its older top-level fields.
//
// A manifest already in today's API is returned unchanged.
//
// The conversion keeps the old operators' defaults (a TfJob group without a type is the
// MASTER, a PS group without a template runs TensorFlow's standard server, Kubeflow's replicas
// restart Never, or OnFailure for PyTorch) and says, in Result.Warnings, everything a person
// should know: the conversion itself, each field dropped, each default applied, and what the
// apiserver would refuse in the result, in its own words: the job is validated in process
// against the CRD (operator/crdvalidate), which alone says what a field takes; convert carries
// values into the job as written (crd.go). What cannot be converted is an error naming the field.
package convert

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// Result is a manifest in today's API.
type Result struct {
	// Job is the job: a *v1beta1.TfJob, *v1beta1.MXJob, *v1beta1.PyTorchJob, ...
	Job v1beta1.Job
	// From is what it was, e.g. "mlkube.io/v1beta1 TfJob (2017, snake_case)",
	// "kubeflow.org/v1 TFJob" or "fioravanzo.org/v1alpha1 MXJob"; "" when it was already
	// current.
	From string
	// Warnings has one line per thing a person should know: the conversion itself, dropped
	// fields, defaults applied, and what the apiserver would refuse in the converted job.
	Warnings []string
	// Invalid is what the apiserver would refuse in a create of Job, as it would say it (see
	// crdvalidate.Validate); nil when it would create it. It is set for a manifest already in
	// today's API too, which has no warnings.
	Invalid field.ErrorList
}

// Convert reads one YAML or JSON document and returns it in today's API.
func Convert(data []byte) (res *Result, err error) {
	// Every input is meant to end in a result or an error (FuzzConvert checks convert, which has
	// no such net); a panic here is a bug, reported as an error rather than a crash of devctl.
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("converting the manifest failed (a bug in devctl; please report it with the manifest): %v", r)
		}
	}()
	return convert(data)
}

// Split returns the documents of a YAML stream (or a JSON object), leaving out empty ones, so
// that a file of several manifests can be converted one document at a time.
func Split(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d is not YAML or JSON: %w", len(docs)+1, nullKey(err))
		}
		if string(bytes.TrimSpace(j)) != "null" {
			docs = append(docs, doc)
		}
	}
}

// nullKey puts in words what sigs.k8s.io/yaml reports, through a broken format verb, for a
// mapping key that is null (~: x): "unsupported map key of type: %!s(<nil>), key: <nil>, ...".
func nullKey(err error) error {
	if strings.Contains(err.Error(), "unsupported map key of type: %!s(<nil>)") {
		return errors.New("a mapping key is null (~ or null); keys must be names, such as apiVersion")
	}
	return err
}

func convert(data []byte) (*Result, error) {
	doc, err := parse(data)
	if err != nil {
		return nil, err
	}
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if kind == "List" || strings.HasSuffix(kind, "List") {
		return nil, fmt.Errorf("this is a %s: convert its items one at a time", kind)
	}
	for _, k := range jobKinds {
		if apiVersion == v1beta1.GroupVersion.String() && kind == k.Name && isCurrent(doc, k) {
			return passThrough(doc, k)
		}
		for i := range k.list.forms {
			f := &k.list.forms[i]
			if apiVersion == f.apiVersion && strings.EqualFold(kind, f.kind) && (!f.snakeCase || usesSnakeCase(doc)) {
				return fromList(doc, k, f)
			}
		}
		group, version, _ := strings.Cut(apiVersion, "/")
		if kf := k.kubeflow; kf != nil && group == "kubeflow.org" && strings.EqualFold(kind, kf.kind) && slices.Contains(kf.versions, version) {
			return fromKubeflow(doc, k, apiVersion+" "+kf.kind)
		}
	}
	var what string
	switch {
	case kind == "" && apiVersion == "":
		what = "an object with no apiVersion and kind"
	case kind == "":
		what = fmt.Sprintf("an object of %s with no kind", apiVersion)
	case apiVersion == "":
		what = fmt.Sprintf("a %s with no apiVersion", kind)
	default:
		what = fmt.Sprintf("a %s of %s", kind, apiVersion)
	}
	var names []string
	for _, k := range jobKinds {
		names = append(names, k.Name)
	}
	return nil, fmt.Errorf("this is %s, not a %s this can convert: it takes %s", what, join(names, "or"), readable())
}

// readable lists the forms convert reads, for the error about one it does not.
func readable() string {
	var kinds []string
	for _, k := range jobKinds {
		forms := []string{v1beta1.GroupVersion.String() + " " + k.Name + " (today's)"}
		for _, f := range k.list.forms {
			if f.operator != "" {
				forms = append(forms, f.from)
			}
		}
		if kf := k.kubeflow; kf != nil {
			forms = append(forms, fmt.Sprintf("kubeflow.org/%s %s (or %s)", kf.versions[0], kf.kind, strings.Join(kf.versions[1:], ", ")))
		}
		kinds = append(kinds, joinAnd(forms))
	}
	return strings.Join(kinds, "; ")
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// parse reads the one document of data as a JSON-like tree, numbers kept as written.
func parse(data []byte) (map[string]any, error) {
	docs, err := Split(data)
	if err != nil {
		return nil, err
	}
	switch len(docs) {
	case 0:
		return nil, errors.New("the manifest is empty: no YAML or JSON object in it")
	case 1:
	default:
		return nil, fmt.Errorf("the manifest holds %d documents: convert them one at a time", len(docs))
	}
	j, err := yaml.YAMLToJSONStrict(docs[0])
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	v, err := parseJSON(j)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the manifest is %s, not a Kubernetes object", describe(v))
	}
	return doc, nil
}

// usesSnakeCase tells the 2017 snake_case form by its keys: in the spec, a replica group or
// the TensorBoard section.
func usesSnakeCase(doc map[string]any) bool {
	spec, _ := doc["spec"].(map[string]any)
	if spec == nil {
		return false
	}
	if hasSnakeCase(spec) {
		return true
	}
	for _, k := range []string{"replicaSpecs", "replica_specs"} {
		groups, _ := spec[k].([]any)
		for _, g := range groups {
			if m, ok := g.(map[string]any); ok && hasSnakeCase(m) {
				return true
			}
		}
	}
	for _, k := range []string{"tensorboard", "tensorBoard", "tensor_board"} {
		if m, ok := spec[k].(map[string]any); ok && hasSnakeCase(m) {
			return true
		}
	}
	return false
}

// readJob reads what every job has: its metadata, and the spec to read further, from the
// document, which it returns to be checked for what nobody read. The old status is dropped: the
// operator writes a new one.
func readJob(docMap map[string]any, w *warnings) (*fields, metav1.ObjectMeta, *fields, error) {
	var meta metav1.ObjectMeta
	doc, err := object("", docMap)
	if err != nil {
		return nil, meta, nil, err
	}
	doc.lookup("apiVersion")
	doc.lookup("kind")
	if meta, err = metadata(doc, w); err != nil {
		return nil, meta, nil, err
	}
	if _, status, ok, _ := doc.raw("status"); ok && !isEmpty(status) {
		w.add("dropped status: the operator writes the job's status afresh")
	}
	spec, ok, err := doc.object("spec")
	if err != nil {
		return nil, meta, nil, err
	}
	if !ok {
		return nil, meta, nil, fmt.Errorf("spec is missing: a job needs its replica groups")
	}
	return doc, meta, spec, nil
}

// replicaGroup is one replica group as read, whatever the form and the kind.
type replicaGroup struct {
	typ      string
	replicas int32
	port     int32
	policy   v1beta1.RestartPolicy
	template corev1.PodTemplateSpec
	// path is where the manifest had the group; from, where it had each of today's fields of
	// the group that it set (by today's key: tfPort), for the CRD's refusals (origins).
	path string
	from map[string]string
}

// came says that the manifest set the group's field key (today's) at path.
func (g *replicaGroup) came(key, path string) {
	if g.from == nil {
		g.from = map[string]string{}
	}
	g.from[key] = path
}

// finish makes the job of a conversion: it warns of the fields of spec and doc no one read,
// builds the job of kind k from its metadata, groups and the other fields of its spec (spec:
// runPolicy, tensorboard, ...), and warns of what the apiserver would refuse in it.
// o says where the manifest had the fields of spec that are not in groups (runPolicy, ...).
func finish(k *jobKind, doc, spec *fields, meta metav1.ObjectMeta, groups []replicaGroup, specFields map[string]any, o origins, from string, w *warnings) (*Result, error) {
	w.dropped(spec.unread(), fmt.Sprintf("today's %s has no such fields", k.Name))
	w.dropped(doc.unread(), fmt.Sprintf("%s has no such top-level fields", aKind(k.Name)))
	job, err := k.build(meta, groups, specFields)
	if err != nil {
		return nil, err
	}
	res := &Result{Job: job, From: from, Invalid: crdvalidate.Validate(job)}
	for i := range groups {
		o.group(i, &groups[i])
	}
	// The conversion does not change the job to pass: each is a decision about the job (which
	// replica decides, how groups merge, what the training container is called) that the old
	// operator did not make either. Nor does it check a range or an enum itself: a value out of
	// either reaches the job as written, and the CRD says what it takes.
	for _, e := range res.Invalid {
		w.add("%s", o.refused(e))
	}
	res.Warnings = *w
	return res, nil
}

// build makes a job of kind k: its groups go into spec.replicaSpecs under the kind's keys.
func (k *jobKind) build(meta metav1.ObjectMeta, groups []replicaGroup, spec map[string]any) (v1beta1.Job, error) {
	specs := make([]map[string]any, len(groups))
	for i, g := range groups {
		specs[i] = map[string]any{k.TypeField: g.typ, "replicas": g.replicas, k.PortField: g.port, "template": g.template}
		if g.policy != "" {
			specs[i]["restartPolicy"] = g.policy
		}
	}
	spec["replicaSpecs"] = specs
	data, err := json.Marshal(map[string]any{"apiVersion": v1beta1.GroupVersion.String(), "kind": k.Name, "metadata": meta, "spec": spec})
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a key of the table that the kind lacks
	job := k.New()
	if err := dec.Decode(job); err != nil {
		return nil, fmt.Errorf("building the %s (a bug in devctl): %w", k.Name, err)
	}
	return job, nil
}

// aKind is the kind's name with its article: "a TfJob", "an MXJob".
func aKind(name string) string {
	initialism := len(name) > 1 && unicode.IsUpper(rune(name[1]))
	if initialism && strings.ContainsRune("AEFHILMNORSX", rune(name[0])) || !initialism && strings.ContainsRune("AEIOU", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}

// warnings collects what a conversion tells the person: one line each.
type warnings []string

func (w *warnings) add(format string, args ...any) {
	*w = append(*w, fmt.Sprintf(format, args...))
}

// dropped warns of fields the conversion leaves out, saying why.
func (w *warnings) dropped(paths []string, why string) {
	if len(paths) == 0 {
		return
	}
	w.add("dropped %s: %s", joinAnd(paths), why)
}
