// Package convert turns job manifests written for earlier TensorFlow and MXNet operators into
// today's mlkube.io/v1beta1 TfJob and MXJob, so that `devctl run` and `devctl convert` accept
// them. For TfJob it reads:
//
//   - mlkube.io/v1beta1 TfJob as it is today: returned unchanged.
//   - mlkube.io/v1beta1 TfJob of 2017, the first TensorFlow operator (tensorflow/k8s), in its
//     snake_case form (replica_specs, tf_replica_type, tf_port, tensor_board.log_dir) and its
//     later camelCase form (replicaSpecs, tfImage, tensorboard).
//   - tensorflow.org/v1alpha1 TfJob and kubeflow.org/v1alpha1 TFJob, its successors: the same
//     replica list, plus terminationPolicy, and cleanPodPolicy and schedulerName in Kubeflow's.
//   - kubeflow.org/v1 TFJob (and v1alpha2, v1beta1, v1beta2, the same shape): tfReplicaSpecs, a
//     map keyed by Chief, Master, Worker, PS and Evaluator; runPolicy or its older top-level
//     fields.
//
// For MXJob it reads:
//
//   - mlkube.io/v1beta1 MXJob as it is today: returned unchanged.
//   - fioravanzo.org/v1alpha1 MXJob, the fork of the first TensorFlow operator for MXNet, and
//     kubeflow.org/v1alpha1 MXJob, Kubeflow's first MXNet operator, made from the same code: a
//     replicaSpecs list of mxReplicaType SCHEDULER, SERVER and WORKER groups, each with its
//     replicas, port (mxPort in the fork, PsRootPort in Kubeflow's) and pod template.
//   - kubeflow.org/v1 MXJob (and v1alpha2, v1beta1, the same shape): mxReplicaSpecs, a map keyed
//     by Scheduler, Server and Worker; runPolicy or its older top-level fields.
//
// The conversion keeps the old operators' defaults (a replica group without a type is the
// MASTER, a PS group without a template runs TensorFlow's standard server, Kubeflow's replicas
// restart Never) and says, in Result.Warnings, everything a person should know: the conversion
// itself, each field dropped, each default applied, and what would keep the result from
// passing today's validation. What cannot be converted is an error naming the field.
package convert

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Result is a manifest in today's API.
type Result struct {
	// Job is the job: a *v1beta1.TfJob or a *v1beta1.MXJob.
	Job client.Object
	// From is what it was, e.g. "mlkube.io/v1beta1 TfJob (2017, snake_case)",
	// "kubeflow.org/v1 TFJob" or "fioravanzo.org/v1alpha1 MXJob"; "" when it was already
	// current.
	From string
	// Warnings has one line per thing a person should know: the conversion itself, dropped
	// fields, defaults applied, and what the result still needs to pass validation.
	Warnings []string
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
	group, version, _ := strings.Cut(apiVersion, "/")
	isTfJob := strings.EqualFold(kind, "TfJob")
	isMXJob := strings.EqualFold(kind, "MXJob")
	kubeflowMap := version == "v1" || version == "v1beta2" || version == "v1beta1" || version == "v1alpha2"
	switch {
	case group == v1beta1.GroupVersion.Group && version == v1beta1.GroupVersion.Version && isTfJob:
		if isCurrent(doc) {
			return passThrough(doc, &v1beta1.TfJob{})
		}
		if usesSnakeCase(doc) {
			return fromReplicaList(doc, apiVersion+" TfJob (2017, snake_case)")
		}
		return fromReplicaList(doc, apiVersion+" TfJob (2017, camelCase)")
	case group == "tensorflow.org" && version == "v1alpha1" && isTfJob:
		return fromReplicaList(doc, apiVersion+" TfJob")
	case group == "kubeflow.org" && version == "v1alpha1" && isTfJob:
		return fromReplicaList(doc, apiVersion+" TFJob")
	case group == "kubeflow.org" && isTfJob && kubeflowMap:
		return fromKubeflow(doc, apiVersion+" TFJob")

	case group == v1beta1.GroupVersion.Group && version == v1beta1.GroupVersion.Version && isMXJob:
		if isCurrentMX(doc) {
			return passThrough(doc, &v1beta1.MXJob{})
		}
		return fromMXList(doc, mlkubeMXForm)
	case group == "fioravanzo.org" && version == "v1alpha1" && isMXJob:
		return fromMXList(doc, fioravanzoForm)
	case group == "kubeflow.org" && version == "v1alpha1" && isMXJob:
		return fromMXList(doc, kubeflowMXForm)
	case group == "kubeflow.org" && isMXJob && kubeflowMap && version != "v1beta2":
		return fromKubeflowMX(doc, apiVersion+" MXJob")
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
	return nil, fmt.Errorf("this is %s, not a TfJob or MXJob this can convert: it takes mlkube.io/v1beta1 TfJob "+
		"(today's, and the 2017 snake_case and camelCase forms), tensorflow.org/v1alpha1 TfJob, "+
		"kubeflow.org/v1alpha1 TFJob and kubeflow.org/v1 TFJob (or v1alpha2, v1beta1, v1beta2); "+
		"mlkube.io/v1beta1 MXJob (today's), fioravanzo.org/v1alpha1 MXJob, kubeflow.org/v1alpha1 MXJob "+
		"and kubeflow.org/v1 MXJob (or v1alpha2, v1beta1)", what)
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

// readJob reads what every job has: its metadata, and the spec to read further. The old
// status is dropped: the operator writes a new one.
func readJob(doc *fields, w *warnings) (metav1.ObjectMeta, *fields, error) {
	doc.lookup("apiVersion")
	doc.lookup("kind")
	meta, err := metadata(doc, w)
	if err != nil {
		return meta, nil, err
	}
	if _, status, ok, _ := doc.raw("status"); ok && !isEmpty(status) {
		w.add("dropped status: the operator writes the job's status afresh")
	}
	spec, ok, err := doc.object("spec")
	if err != nil {
		return meta, nil, err
	}
	if !ok {
		return meta, nil, fmt.Errorf("spec is missing: a job needs its replica groups")
	}
	return meta, spec, nil
}

// newJob starts a converted TfJob: type, metadata, and the spec to read.
func newJob(doc *fields, w *warnings) (*v1beta1.TfJob, *fields, error) {
	meta, spec, err := readJob(doc, w)
	if err != nil {
		return nil, nil, err
	}
	job := &v1beta1.TfJob{ObjectMeta: meta}
	job.APIVersion = v1beta1.GroupVersion.String()
	job.Kind = "TfJob"
	return job, spec, nil
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
