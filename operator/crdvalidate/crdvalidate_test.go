package crdvalidate

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// tfJob is a valid TfJob of three groups, as the fuzzers and devctl validate them.
func tfJob() *v1beta1.TfJob {
	tmpl := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:dev"}}}}
	}
	return &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Name: "dist", Namespace: "ns"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
		{TfReplicaType: "MASTER", Template: tmpl()},
		{TfReplicaType: "WORKER", Replicas: 4, Template: tmpl()},
		{TfReplicaType: "PS", Replicas: 2, TfPort: 2223, Template: tmpl()},
	}}}
}

func TestEveryKindLoads(t *testing.T) {
	if err := Load(); err != nil {
		t.Fatal(err)
	}
	for _, k := range v1beta1.Kinds {
		if _, err := crdOf(k); err != nil {
			t.Errorf("%s: %v", k.Name, err)
		}
	}
}

// The CRD's own rules and messages come through, with the apiserver's paths, for a typed job
// and the same job unstructured; the job itself is left as it was.
func TestValidate(t *testing.T) {
	if errs := Validate(tfJob()); errs != nil {
		t.Fatalf("a valid job: %v", errs)
	}
	job := tfJob()
	job.Name = "Example_Job"
	job.Spec.ReplicaSpecs[0].Replicas = 2
	job.Spec.ReplicaSpecs[1].TfPort = 70000
	job.Spec.ReplicaSpecs[2].TfReplicaType = "WORKER"
	job.Spec.ReplicaSpecs[2].Template.Spec.Containers[0].Name = "trainer"
	before := job.DeepCopy()
	want := []string{
		`metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (got "Example_Job")`,
		`spec.replicaSpecs[1].tfPort: should be less than or equal to 65535 (got 70000)`,
		`spec.replicaSpecs[2]: Duplicate value: {"tfReplicaType":"WORKER"}`,
		`metadata.name must start with a letter and hold only lower-case letters, digits and '-': it names the job's headless service and prefixes the replica hostnames (DNS-1035 labels)`,
		`spec.replicaSpecs[0]: a MASTER or CHIEF group has exactly one replica: set replicas: 1 (use WORKER for more)`,
		`spec.replicaSpecs[2].template.spec.containers: needs a container named 'tensorflow': the operator gives it TF_CONFIG, and its exit code decides the replica's outcome`,
	}
	if got := lines(Validate(job)); !reflect.DeepEqual(got, want) {
		t.Errorf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !reflect.DeepEqual(job, before) {
		t.Error("Validate changed the job")
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(v1beta1.GroupVersion.String())
	u.SetKind("TfJob")
	if got := lines(Validate(u)); !reflect.DeepEqual(got, want) {
		t.Errorf("Validate of the job unstructured:\n%s", strings.Join(got, "\n"))
	}
}

// As in the apiserver, an unsupported value keeps the CEL rules from running (with an error
// saying so); ValidateAll runs them anyway.
func TestBlockingErrors(t *testing.T) {
	job := tfJob()
	job.Spec.ReplicaSpecs[0].Replicas = 2
	job.Spec.ReplicaSpecs[1].TfReplicaType = "worker"
	want := []string{
		`spec.replicaSpecs[1].tfReplicaType: Unsupported value: "worker": supported values: "MASTER", "CHIEF", "WORKER", "PS", "EVALUATOR"`,
		"some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
	}
	if got := lines(Validate(job)); !reflect.DeepEqual(got, want) {
		t.Errorf("Validate:\n%s", strings.Join(got, "\n"))
	}
	want = []string{want[0], "spec.replicaSpecs[0]: a MASTER or CHIEF group has exactly one replica: set replicas: 1 (use WORKER for more)"}
	if got := lines(ValidateAll(job)); !reflect.DeepEqual(got, want) {
		t.Errorf("ValidateAll:\n%s", strings.Join(got, "\n"))
	}
}

// Metadata as the apiserver has it on a create: generateName stands for a name of its length
// (too long here for the CRD's 48, said of generateName), and a job without a namespace is in
// the request's.
func TestNamesAndNamespaces(t *testing.T) {
	job := tfJob()
	job.Name, job.Namespace, job.GenerateName = "", "", strings.Repeat("g", 44)
	if got := lines(Validate(job)); len(got) != 1 || !strings.HasPrefix(got[0], "metadata.generateName must be at most 43 characters: the apiserver appends 5 random characters to it") {
		t.Errorf("generateName of 44: %q", got)
	}
	job.GenerateName = "gen-"
	if errs := Validate(job); errs != nil {
		t.Errorf("generateName gen-: %v", errs)
	}
	job.GenerateName = ""
	if got := lines(Validate(job)); len(got) != 2 || got[0] != "metadata.name: Required value: name or generateName is required" {
		t.Errorf("no name: %q", got)
	}
	job.Name, job.Namespace = "dist", "Not A Label"
	if got := lines(Validate(job)); len(got) != 1 || !strings.HasPrefix(got[0], "metadata.namespace: a lowercase RFC 1123 label") {
		t.Errorf("namespace: %q", got)
	}
}

func TestDefault(t *testing.T) {
	job := tfJob()
	if err := Default(job); err != nil {
		t.Fatal(err)
	}
	for i, want := range []v1beta1.TfReplicaSpec{
		{TfReplicaType: "MASTER", Replicas: 1, TfPort: 2222, RestartPolicy: "ExitCode"},
		{TfReplicaType: "WORKER", Replicas: 4, TfPort: 2222, RestartPolicy: "ExitCode"},
		{TfReplicaType: "PS", Replicas: 2, TfPort: 2223, RestartPolicy: "ExitCode"},
	} {
		got := job.Spec.ReplicaSpecs[i]
		if got.TfReplicaType != want.TfReplicaType || got.Replicas != want.Replicas || got.TfPort != want.TfPort || got.RestartPolicy != want.RestartPolicy {
			t.Errorf("group %d: %+v", i, got)
		}
	}
	if job.Spec.RunPolicy.CleanPodPolicy != v1beta1.CleanPodPolicyRunning {
		t.Errorf("runPolicy: %+v", job.Spec.RunPolicy)
	}
	if job.Name != "dist" || job.Namespace != "ns" {
		t.Errorf("metadata: %+v", job.ObjectMeta)
	}
}

// Bounds are the CRD's: at them Validate takes a value, and one past them it refuses, at that
// field, in every kind; a path to no bounded integer is an error.
func TestBounds(t *testing.T) {
	for _, k := range v1beta1.Kinds {
		for _, key := range []string{"replicas", k.PortField} {
			lo, hi, err := Bounds(k, "spec.replicaSpecs[*]."+key)
			if err != nil {
				t.Fatal(err)
			}
			at := "spec.replicaSpecs[0]." + key
			for n, refused := range map[int64]bool{lo - 1: true, lo: false, hi: false, hi + 1: true} {
				group := map[string]any{k.TypeField: k.Types[len(k.Types)-1], key: n}
				if key != "replicas" {
					group["replicas"] = int64(1)
				}
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": v1beta1.GroupVersion.String(), "kind": k.Name, "metadata": map[string]any{"name": "j"},
					"spec": map[string]any{"replicaSpecs": []any{group}},
				}}
				got := false
				for _, e := range ValidateAll(u) {
					got = got || e.Field == at
				}
				if got != refused {
					t.Errorf("%s %s %d: refused %v, want %v (bounds %d, %d)", k.Name, key, n, got, refused, lo, hi)
				}
			}
		}
	}
	k := v1beta1.KindOf(&v1beta1.TfJob{})
	for _, path := range []string{"spec.replicaSpecs[*].tfReplicaType", "spec.replicaSpecs.replicas", "spec.nothing", "spec.runPolicy.suspend"} {
		if lo, hi, err := Bounds(k, path); err == nil {
			t.Errorf("Bounds(%s) = %d, %d, want an error", path, lo, hi)
		}
	}
}

func TestNotAJob(t *testing.T) {
	if errs := Validate(&corev1.Pod{}); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("Validate of a pod: %v", errs)
	}
	if err := Default(&corev1.Pod{}); err == nil {
		t.Error("Default of a pod: no error")
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		err  *field.Error
		want string
	}{
		{field.Invalid(field.NewPath("spec", "replicas"), int64(0), "spec.replicas in body should be greater than or equal to 1"), "spec.replicas: should be greater than or equal to 1 (got 0)"},
		{field.Invalid(field.NewPath("spec"), "object", "needs a MASTER"), "spec: needs a MASTER"},
		{field.Invalid(field.NewPath("spec"), field.OmitValueType{}, "needs a MASTER"), "spec: needs a MASTER"},
		{field.Invalid(nil, nil, "a rule on the job"), "a rule on the job"},
		{field.Required(field.NewPath("spec", "replicaSpecs"), ""), "spec.replicaSpecs: Required value"},
		{field.NotSupported(field.NewPath("kind"), "X", []string{"A", "B"}), `kind: Unsupported value: "X": supported values: "A", "B"`},
	} {
		if got := Line(tc.err); got != tc.want {
			t.Errorf("Line(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func lines(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, Line(e))
	}
	return out
}

// BenchmarkValidate is a valid job of three groups: what devctl and the fuzzers pay per job.
func BenchmarkValidate(b *testing.B) {
	job := tfJob()
	if errs := Validate(job); len(errs) != 0 {
		b.Fatal(errs)
	}
	for b.Loop() {
		Validate(job)
	}
}

// BenchmarkLoad is what the first Validate of a kind pays: the CRD read, its CEL compiled.
func BenchmarkLoad(b *testing.B) {
	k := v1beta1.KindOf(&v1beta1.TfJob{})
	for b.Loop() {
		if _, err := load(k); err != nil {
			b.Fatal(err)
		}
	}
}
