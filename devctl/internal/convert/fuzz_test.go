package convert

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// saysWhere is how every error of convert opens: the document, the manifest, or the path of
// the field at fault.
var saysWhere = regexp.MustCompile(`^(document \d+[ :]|this is |the manifest |spec\b|metadata\b)`)

// brokenVerb matches what fmt writes for a verb it could not fill: %!s(<nil>), %!d(string=x),
// %!v(MISSING), %!(EXTRA int=1), %!(NOVERB). An error may quote the input's own text, so
// it counts only when the input holds no such run itself.
var brokenVerb = regexp.MustCompile(`%!\w?\((?:MISSING|NOVERB|BADWIDTH|BADPREC|BADINDEX|EXTRA |<nil>|[\w.*\[\]]+=)`)

func brokenVerbIn(msg string, data []byte) bool {
	return brokenVerb.MatchString(msg) && !brokenVerb.Match(data)
}

// FuzzConvert feeds convert (without Convert's recover, so that a panic shows) anything at all,
// starting from the test inputs and the samples. Whatever it gets, it must not panic; an error
// must say where and why; a result must be a job with a replica group, whose YAML reads back as
// today's API, and every refusal of the CRD (convert checks no range or enum itself) must reach
// the person as a warning in the CRD's words.
// Run it with: go test ./devctl/internal/convert -run '^$' -fuzz FuzzConvert -fuzztime 20s
func FuzzConvert(f *testing.F) {
	var seeds []string
	for _, pattern := range []string{
		filepath.Join("testdata", "*.yaml"),
		filepath.Join(samplesDir, "*.yaml"),
		filepath.Join(samplesDir, "*", "*.yaml"),
	} {
		paths, _ := filepath.Glob(pattern)
		seeds = append(seeds, paths...)
	}
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"[]",
		"{}",
		"apiVersion: kubeflow.org/v1\nkind: TFJob\nspec: {tfReplicaSpecs: {Worker: {replicas: 0}}}",
		"apiVersion: mlkube.io/v1beta1\nkind: TfJob\nspec: {replica_specs: [{tf_replica_type: PS}]}",
		`{"apiVersion":"tensorflow.org/v1alpha1","kind":"TfJob","spec":{"replicaSpecs":[{"replicas":1e3}]}}`,
		"apiVersion: fioravanzo.org/v1alpha1\nkind: MXJob\nspec: {replicaSpecs: [{mxPort: 9000, template: {}}, {mxReplicaType: SERVER, replicas: 0}]}",
		"apiVersion: kubeflow.org/v1alpha1\nkind: MXJob\nspec: {jobMode: local, replicaSpecs: [{PsRootPort: 1, template: {spec: {containers: [{name: mxnet}]}}}]}",
		"apiVersion: kubeflow.org/v1\nkind: MXJob\nspec: {jobMode: MXTrain, mxReplicaSpecs: {scheduler: {template: {}}, Tuner: {}}}",
		"apiVersion: mlkube.io/v1beta1\nkind: MXJob\nspec: {replicaSpecs: [{mxReplicaType: SCHEDULER, port: 0, template: {}}]}",
		"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec: {elasticPolicy: {maxReplicas: 4}, nprocPerNode: auto, pytorchReplicaSpecs: {worker: {template: {}}, MASTER: {replicas: 2}}}",
		"apiVersion: mlkube.io/v1beta1\nkind: PyTorchJob\nspec: {replicaSpecs: [{pytorchReplicaType: MASTER, replicas: 0, template: {}}, {port: 1}]}",
		// Values the CRD refuses, kept as written; values today's Go types cannot hold.
		"apiVersion: mlkube.io/v1beta1\nkind: TfJob\nspec: {tensor_board: {service_type: Internal}, replica_specs: [{tf_port: 70000, replicas: -1, tf_replica_type: CHEF, template: {spec: {restartPolicy: Sometimes}}}]}",
		"apiVersion: kubeflow.org/v1alpha2\nkind: TFJob\nspec: {cleanPodPolicy: CleanSome, ttlSecondsAfterFinishing: -1, tfReplicaSpecs: {Worker: {template: {spec: {containers: [{name: tensorflow, ports: [{name: tfjob-port, containerPort: -1}]}]}}}}}",
		"apiVersion: tensorflow.org/v1alpha1\nkind: TfJob\nspec: {runPolicy: {backoffLimit: 4294967296}, replicaSpecs: [{tfPort: 0, replicas: 1e10, template: {}}]}",
		// Regression: a null key was "unsupported map key of type: %!s(<nil>), key: <nil>, ...".
		"apiVersion: kubeflow.org/v1\nkind: TFJob\nspec: {tfReplicaSpecs: {Worker: {replicas: 1, template: {~: x}}}}",
		"metadata: {name: [a]}\napiVersion: kubeflow.org/v1\nkind: TFJob\nspec: {tfReplicaSpecs: {Worker: {}}}",
		"----", // "document 1: invalid Yaml document separator: -"
		// An error that quotes the input's own "%!" is not a broken format verb.
		"apiVersion: kubeflow.org/v1\nkind: TFJob\nspec: {tfReplicaSpecs: {'%!': {}}}",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := convert(data)
		if err != nil {
			// Where, then why: every error opens with the document, the manifest as a whole
			// or the field at fault; a format verb gone wrong (%!s(<nil>)) says nothing.
			if msg := err.Error(); !saysWhere.MatchString(msg) || brokenVerbIn(msg, data) {
				t.Fatalf("the error for %q does not say where and why: %q", data, msg)
			}
			return
		}
		if res == nil || res.Job == nil || len(res.Job.Groups()) == 0 {
			t.Fatalf("a result without a replica group for %q: %+v", data, res)
		}
		y, err := YAML(res.Job)
		if err != nil {
			t.Fatalf("YAML of the job of %q: %v", data, err)
		}
		again, err := convert(y)
		if err != nil {
			t.Fatalf("the YAML of the job of %q does not convert: %v\n%s", data, err, y)
		}
		if res.From != "" && (again.From != "" || len(again.Warnings) != 0) {
			t.Fatalf("the converted job of %q is not taken for today's API: From %q, warnings %q\n%s", data, again.From, again.Warnings, y)
		}
		for _, e := range res.Invalid {
			if res.From != "" && !hasWarning(res, "the apiserver would refuse the job: "+crdvalidate.Line(e)) {
				t.Fatalf("the CRD's refusal %q of the converted job of %q is not warned of: %q", crdvalidate.Line(e), data, res.Warnings)
			}
		}
	})
}
