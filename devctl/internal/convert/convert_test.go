package convert

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// group is what a test expects of one converted replica group, of any kind: what the spec
// says, no default filled in.
type group struct {
	typ      string
	replicas int32
	port     int32
	policy   v1beta1.RestartPolicy
}

// groupsOf are the replica groups of a job of any kind, as its spec has them.
func groupsOf(t *testing.T, job v1beta1.Job) []group {
	t.Helper()
	k := kindOf(job)
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec struct{ ReplicaSpecs []map[string]any } `json:"spec"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []group
	for _, r := range doc.Spec.ReplicaSpecs {
		num := func(key string) int32 { n, _ := r[key].(float64); return int32(n) }
		typ, _ := r[k.TypeField].(string)
		policy, _ := r["restartPolicy"].(string)
		out = append(out, group{typ, num("replicas"), num(k.PortField), v1beta1.RestartPolicy(policy)})
	}
	return out
}

// formCase is a manifest in an old form and what its conversion must give.
type formCase struct {
	name     string
	manifest string
	from     string
	groups   []group
	warnings [][]string // each: parts one warning holds
}

// checkForms converts each case's manifest and checks what it gives.
func checkForms(t *testing.T, cases []formCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := mustConvert(t, tc.manifest)
			if res.From != tc.from {
				t.Errorf("From = %q, want %q", res.From, tc.from)
			}
			got := groupsOf(t, res.Job)
			if len(got) != len(tc.groups) {
				t.Fatalf("groups = %v, want %v", got, tc.groups)
			}
			for i := range got {
				if got[i] != tc.groups[i] {
					t.Errorf("group %d = %+v, want %+v", i, got[i], tc.groups[i])
				}
			}
			if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "converted") || !strings.Contains(res.Warnings[0], tc.from) {
				t.Errorf("the first warning does not tell of the conversion: %q", res.Warnings)
			}
			for _, parts := range tc.warnings {
				if !hasWarning(res, parts...) {
					t.Errorf("no warning holds %q; warnings:\n%s", parts, strings.Join(res.Warnings, "\n"))
				}
			}
			if len(res.Invalid) != 0 {
				t.Errorf("the apiserver would refuse the converted job: %v", res.Invalid)
			}
		})
	}
}

// tf is the TfJob of a result.
func tf(res *Result) *v1beta1.TfJob { return res.Job.(*v1beta1.TfJob) }

func mustConvert(t *testing.T, manifest string) *Result {
	t.Helper()
	res, err := Convert([]byte(manifest))
	if err != nil {
		t.Fatalf("Convert: %v\n%s", err, manifest)
	}
	assertCurrent(t, res)
	return res
}

// hasWarning tells whether a warning holds every one of parts.
func hasWarning(res *Result, parts ...string) bool {
next:
	for _, w := range res.Warnings {
		for _, p := range parts {
			if !strings.Contains(w, p) {
				continue next
			}
		}
		return true
	}
	return false
}

func TestFormatsAndDefaults(t *testing.T) {
	checkForms(t, []formCase{{
		name: "2017 snake_case: no type is MASTER, no replicas is 1, no port is 2222",
		manifest: `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: defaults}
spec:
  replica_specs:
  - template: {spec: {containers: [{name: tensorflow, image: tf_sample}]}}
  - tf_replica_type: WORKER
    tf_port: 3333
    replicas: 4
    template: {spec: {containers: [{name: tensorflow, image: tf_sample}]}}`,
		from:     "mlkube.io/v1beta1 TfJob (2017, snake_case)",
		groups:   []group{{"MASTER", 1, 2222, ""}, {"WORKER", 4, 3333, ""}},
		warnings: [][]string{{"converted from mlkube.io/v1beta1 TfJob (2017, snake_case)"}, {"spec.replica_specs[0] has no tf_replica_type", "MASTER"}},
	}, {
		name: "2017 camelCase: a group without a type (tf_job_defaults.yaml)",
		manifest: `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: example-job-defaults}
spec:
  replicaSpecs:
  - template:
      spec:
        containers: [{name: tensorflow, image: tf_sample}]
        restartPolicy: OnFailure`,
		from:     "mlkube.io/v1beta1 TfJob (2017, camelCase)",
		groups:   []group{{"MASTER", 1, 2222, "OnFailure"}},
		warnings: [][]string{{"spec.replicaSpecs[0] has no tfReplicaType"}, {"spec.replicaSpecs[0]: moved restartPolicy: OnFailure"}},
	}, {
		name: "tensorflow.org/v1alpha1",
		manifest: `
apiVersion: tensorflow.org/v1alpha1
kind: TfJob
metadata: {name: example-job}
spec:
  replicaSpecs:
  - {replicas: 1, tfReplicaType: MASTER, template: {spec: {containers: [{name: tensorflow, image: tf_sample}]}}}
  - {replicas: 1, tfReplicaType: WORKER, template: {spec: {containers: [{name: tensorflow, image: tf_sample}]}}}
  - {replicas: 2, tfReplicaType: PS}`,
		from:   "tensorflow.org/v1alpha1 TfJob",
		groups: []group{{"MASTER", 1, 2222, ""}, {"WORKER", 1, 2222, ""}, {"PS", 2, 2222, "OnFailure"}},
	}, {
		name: "kubeflow.org/v1: keys map to types, restart policies carry over, unset is Never",
		manifest: `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist}
spec:
  tfReplicaSpecs:
    Evaluator: {restartPolicy: Always, template: {spec: {containers: [{name: tensorflow, image: tf}]}}}
    PS: {replicas: 2, template: {spec: {containers: [{name: tensorflow, image: tf}]}}}
    Worker: {replicas: 3, restartPolicy: OnFailure, template: {spec: {containers: [{name: tensorflow, image: tf}]}}}
    Master: {replicas: 1, restartPolicy: ExitCode, template: {spec: {containers: [{name: tensorflow, image: tf}]}}}`,
		from:     "kubeflow.org/v1 TFJob",
		groups:   []group{{"MASTER", 1, 2222, "ExitCode"}, {"WORKER", 3, 2222, "OnFailure"}, {"PS", 2, 2222, "Never"}, {"EVALUATOR", 1, 2222, "Always"}},
		warnings: [][]string{{"spec.tfReplicaSpecs.PS: no restartPolicy, so Never"}},
	}, {
		name: "kubeflow.org/v1: Chief, and the port named tfjob-port",
		manifest: `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist}
spec:
  tfReplicaSpecs:
    chief:
      restartPolicy: Never
      template: {spec: {containers: [{name: tensorflow, image: tf, ports: [{name: tfjob-port, containerPort: 2020}]}]}}`,
		from:   "kubeflow.org/v1 TFJob",
		groups: []group{{"CHIEF", 1, 2020, "Never"}},
	}, {
		name: "kubeflow.org/v1beta2",
		manifest: `
apiVersion: kubeflow.org/v1beta2
kind: TFJob
metadata: {name: dist}
spec:
  tfReplicaSpecs:
    Worker: {replicas: 2, restartPolicy: Never, template: {spec: {containers: [{name: tensorflow, image: tf}]}}}`,
		from:   "kubeflow.org/v1beta2 TFJob",
		groups: []group{{"WORKER", 2, 2222, "Never"}},
	}})
}

func TestCurrentPassesThroughUnchanged(t *testing.T) {
	manifest := `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: mnist
  labels: {team: a}
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template: {spec: {containers: [{name: tensorflow, image: mlkube/trainer:dev}]}}
  - tfReplicaType: WORKER
    replicas: 2
    tfPort: 2345
    restartPolicy: Never
    template: {spec: {containers: [{name: tensorflow, image: mlkube/trainer:dev}]}}
  runPolicy: {cleanPodPolicy: All, backoffLimit: 0}`
	res := mustConvert(t, manifest)
	if res.From != "" || len(res.Warnings) != 0 {
		t.Fatalf("From %q, warnings %q; want a pass-through", res.From, res.Warnings)
	}
	got := groupsOf(t, res.Job)
	want := []group{{"MASTER", 0, 0, ""}, {"WORKER", 2, 2345, "Never"}} // nothing filled in
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("groups = %v, want %v", got, want)
	}
	if p := tf(res).Spec.RunPolicy; p.CleanPodPolicy != "All" || p.BackoffLimit == nil || *p.BackoffLimit != 0 {
		t.Errorf("runPolicy = %+v", p)
	}
	if tf(res).Labels["team"] != "a" {
		t.Errorf("labels = %v", tf(res).Labels)
	}
}

func TestCurrentLookingJobsThatAreNot(t *testing.T) {
	// Each is mlkube.io/v1beta1 in camelCase, but leans on a 2017 default or carries a field
	// today's TfJob lacks: it is converted, not passed through.
	for name, manifest := range map[string]string{
		"no tfReplicaType": `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: a}
spec:
  replicaSpecs:
  - template: {spec: {containers: [{name: tensorflow, image: x}]}}`,
		"restartPolicy in the template": `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: a}
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template: {spec: {restartPolicy: Never, containers: [{name: tensorflow, image: x}]}}`,
		"tfImage": `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: a}
spec:
  tfImage: tensorflow/tensorflow:1.3.0
  replicaSpecs:
  - tfReplicaType: MASTER
    template: {spec: {containers: [{name: tensorflow, image: x}]}}`,
		"replicas: 0": `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: a}
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template: {spec: {containers: [{name: tensorflow, image: x}]}}
  - tfReplicaType: WORKER
    replicas: 0
    template: {spec: {containers: [{name: tensorflow, image: x}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			res := mustConvert(t, manifest)
			if res.From != "mlkube.io/v1beta1 TfJob (2017, camelCase)" || len(res.Warnings) < 2 {
				t.Errorf("From %q, warnings %q; want a conversion from the 2017 camelCase form that says what it did", res.From, res.Warnings)
			}
		})
	}
}

func TestPSWithoutTemplateRunsTheStandardServer(t *testing.T) {
	for _, tc := range []struct {
		name, tfImage, wantImage string
	}{
		{"default image", "", DefaultPSImage},
		{"spec.tfImage", "tensorflow/tensorflow:1.3.0", "tensorflow/tensorflow:1.3.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest := `
apiVersion: tensorflow.org/v1alpha1
kind: TfJob
metadata: {name: ps}
spec:
  replicaSpecs:
  - {tfReplicaType: MASTER, template: {spec: {containers: [{name: tensorflow, image: x}]}}}
  - {tfReplicaType: PS, replicas: 3, tfPort: 2300}`
			if tc.tfImage != "" {
				manifest += "\n  tfImage: " + tc.tfImage
			}
			res := mustConvert(t, manifest)
			ps := tf(res).Spec.ReplicaSpecs[1]
			if ps.TfReplicaType != "PS" || ps.Replicas != 3 || ps.TfPort != 2300 || ps.RestartPolicy != "OnFailure" {
				t.Errorf("PS group = %+v", group{string(ps.TfReplicaType), ps.Replicas, ps.TfPort, ps.RestartPolicy})
			}
			cs := ps.Template.Spec.Containers
			if len(cs) != 1 {
				t.Fatalf("containers = %+v", cs)
			}
			c := cs[0]
			if c.Name != "tensorflow" || c.Image != tc.wantImage {
				t.Errorf("container %q image %q, want tensorflow, %s", c.Name, c.Image, tc.wantImage)
			}
			if len(c.Command) != 3 || c.Command[0] != "python" || c.Command[1] != "-c" ||
				!strings.Contains(c.Command[2], `os.environ["TF_CONFIG"]`) || !strings.Contains(c.Command[2], ".join()") {
				t.Errorf("command = %q", c.Command)
			}
			if !hasWarning(res, "spec.replicaSpecs[1] (PS) has no template", tc.wantImage) {
				t.Errorf("no warning about the PS template; warnings:\n%s", strings.Join(res.Warnings, "\n"))
			}
		})
	}
}

func TestRestartPolicyInTheTemplate(t *testing.T) {
	t.Run("list form: moved to the group", func(t *testing.T) {
		res := mustConvert(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: a}
spec:
  replica_specs:
  - tf_replica_type: MASTER
    template: {spec: {restartPolicy: OnFailure, containers: [{name: tensorflow, image: x}]}}
  - tf_replica_type: WORKER
    template: {spec: {restartPolicy: Never, containers: [{name: tensorflow, image: x}]}}`)
		for i, want := range []v1beta1.RestartPolicy{"OnFailure", "Never"} {
			r := tf(res).Spec.ReplicaSpecs[i]
			if r.RestartPolicy != want || r.Template.Spec.RestartPolicy != "" {
				t.Errorf("group %d: restartPolicy %q, template's %q; want %q and none", i, r.RestartPolicy, r.Template.Spec.RestartPolicy, want)
			}
		}
		if !hasWarning(res, "spec.replica_specs[0]: moved restartPolicy: OnFailure from the pod template", "ExitCode") ||
			!hasWarning(res, "spec.replica_specs[1]: moved restartPolicy: Never from the pod template") {
			t.Errorf("warnings:\n%s", strings.Join(res.Warnings, "\n"))
		}
	})
	t.Run("kubeflow: the group's wins, as it did in Kubeflow", func(t *testing.T) {
		res := mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: a}
spec:
  tfReplicaSpecs:
    Worker:
      template: {spec: {restartPolicy: OnFailure, containers: [{name: tensorflow, image: x}]}}
    PS:
      restartPolicy: Always
      template: {spec: {restartPolicy: OnFailure, containers: [{name: tensorflow, image: x}]}}`)
		for i, want := range []v1beta1.RestartPolicy{"Never", "Always"} {
			r := tf(res).Spec.ReplicaSpecs[i]
			if r.RestartPolicy != want || r.Template.Spec.RestartPolicy != "" {
				t.Errorf("group %d: restartPolicy %q, template's %q; want %q and none", i, r.RestartPolicy, r.Template.Spec.RestartPolicy, want)
			}
		}
		if !hasWarning(res, "dropped spec.tfReplicaSpecs.Worker.template.spec.restartPolicy: OnFailure", "Never, Kubeflow's default") ||
			!hasWarning(res, "dropped spec.tfReplicaSpecs.PS.template.spec.restartPolicy: OnFailure", "here Always") {
			t.Errorf("warnings:\n%s", strings.Join(res.Warnings, "\n"))
		}
	})
}

func TestRunPolicy(t *testing.T) {
	res := mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: a}
spec:
  cleanPodPolicy: None
  activeDeadlineSeconds: 60
  runPolicy:
    backoffLimit: 0
    ttlSecondsAfterFinished: 30
  tfReplicaSpecs:
    Worker: {restartPolicy: ExitCode, template: {spec: {containers: [{name: tensorflow, image: x}]}}}`)
	p := tf(res).Spec.RunPolicy
	if p.CleanPodPolicy != "None" || p.ActiveDeadlineSeconds == nil || *p.ActiveDeadlineSeconds != 60 ||
		p.BackoffLimit == nil || *p.BackoffLimit != 0 || p.TTLSecondsAfterFinished == nil || *p.TTLSecondsAfterFinished != 30 {
		t.Errorf("runPolicy = %+v", p)
	}
}

func TestDroppedFieldsAreNamed(t *testing.T) {
	res := mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: a
  uid: 1234
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
spec:
  successPolicy: AllWorkers
  enableDynamicWorker: true
  onExit: {spec: {containers: [{name: x, image: y}]}}
  runPolicy:
    schedulingPolicy: {minAvailable: 3, queue: q}
    suspend: true
  tfReplicaSpecs:
    Worker:
      restartPolicy: Never
      tfPort: 2000
      template:
        spec:
          containers: [{name: tensorflow, image: x, gpus: 2}]
status:
  conditions: [{type: Created}]`)
	for _, parts := range [][]string{
		{"dropped spec.successPolicy: AllWorkers"},
		{"dropped spec.enableDynamicWorker: true"},
		{"dropped spec.onExit"},
		{"dropped spec.runPolicy.schedulingPolicy"},
		{"dropped spec.tfReplicaSpecs.Worker.tfPort"},
		{"dropped spec.tfReplicaSpecs.Worker.template.spec.containers[0].gpus"},
		{"dropped metadata.uid"},
		{"dropped the annotation kubectl.kubernetes.io/last-applied-configuration"},
		{"dropped status"},
	} {
		if !hasWarning(res, parts...) {
			t.Errorf("no warning holds %q", parts)
		}
	}
	if t.Failed() {
		t.Logf("warnings:\n%s", strings.Join(res.Warnings, "\n"))
	}
	if len(tf(res).Annotations) != 0 {
		t.Errorf("annotations = %v", tf(res).Annotations)
	}
	// Kueue's contract: a job created suspended stays so when converted.
	if !tf(res).Spec.RunPolicy.Suspended() || hasWarning(res, "suspend") {
		t.Errorf("runPolicy.suspend: %v, warnings:\n%s", tf(res).Spec.RunPolicy.Suspend, strings.Join(res.Warnings, "\n"))
	}
}

// What the apiserver would refuse in a converted job is warned of, in the apiserver's words:
// the CRD's own messages, which say what to change. Nothing is renamed or merged: the old
// operators required a container named tensorflow too, and which groups merge is a decision.
func TestWhatValidationWouldRefuseIsWarned(t *testing.T) {
	res := mustConvert(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: Example_Job}
spec:
  replica_specs:
  - tf_replica_type: MASTER
    replicas: 2
    template: {spec: {containers: [{name: trainer, image: x}]}}
  - tf_replica_type: PS
    template: {spec: {containers: [{name: tensorflow, image: x}]}}
  - tf_replica_type: PS
    template: {spec: {containers: [{name: tensorflow, image: x}]}}`)
	assertRefusals(t, res,
		[]string{`metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters`, `(got "Example_Job")`},
		[]string{"metadata.name must start with a letter and hold only lower-case letters, digits and '-'"},
		[]string{"spec.replicaSpecs[0]: a MASTER or CHIEF group has exactly one replica: set replicas: 1"},
		[]string{"spec.replicaSpecs[0].template.spec.containers: needs a container named 'tensorflow'"},
		[]string{"spec.replicaSpecs[2]: Duplicate value", `"tfReplicaType":"PS"`},
	)
	if c := tf(res).Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Name; c != "trainer" {
		t.Errorf("container renamed to %q", c)
	}
}

// assertRefusals checks that res warns of exactly what the apiserver would refuse (its
// Invalid), one warning each, and that each of want (parts one such warning holds) is among
// them.
func assertRefusals(t *testing.T, res *Result, want ...[]string) {
	t.Helper()
	const prefix = "the apiserver would refuse the job: "
	var refusals []string
	for _, w := range res.Warnings {
		if strings.HasPrefix(w, prefix) {
			refusals = append(refusals, w)
		}
	}
	if len(refusals) != len(res.Invalid) || len(res.Invalid) == 0 {
		t.Errorf("%d refusals warned of, %d in Invalid: %v", len(refusals), len(res.Invalid), res.Invalid)
	}
	for i, e := range res.Invalid {
		// In the CRD's words, then where the manifest had the field, when it named it otherwise.
		line := prefix + crdvalidate.Line(e)
		if i < len(refusals) && refusals[i] != line && !strings.HasPrefix(refusals[i], line+"; in the manifest, ") {
			t.Errorf("warning %q, want %q", refusals[i], line)
		}
	}
	for _, parts := range want {
		if !hasWarning(res, append([]string{prefix}, parts...)...) {
			t.Errorf("no refusal holds %q; warnings:\n%s", parts, strings.Join(res.Warnings, "\n"))
		}
	}
}

func TestTerminationPolicy(t *testing.T) {
	manifest := func(name string, index int) string {
		return `
apiVersion: tensorflow.org/v1alpha1
kind: TfJob
metadata: {name: a}
spec:
  terminationPolicy: {chief: {replicaName: ` + name + `, replicaIndex: ` + string(rune('0'+index)) + `}}
  replicaSpecs:
  - {tfReplicaType: WORKER, replicas: 2, template: {spec: {containers: [{name: tensorflow, image: x}]}}}`
	}
	if res := mustConvert(t, manifest("WORKER", 0)); hasWarning(res, "terminationPolicy") {
		t.Errorf("worker 0 decides today too, yet: %q", res.Warnings)
	}
	if res := mustConvert(t, manifest("WORKER", 1)); !hasWarning(res, "spec.terminationPolicy.chief names WORKER 1", "cannot express", "here WORKER 0") {
		t.Errorf("warnings: %q", res.Warnings)
	}
	if res := mustConvert(t, manifest("MASTER", 0)); !hasWarning(res, "spec.terminationPolicy.chief names MASTER 0") {
		t.Errorf("a job without a MASTER cannot keep MASTER 0 deciding, yet: %q", res.Warnings)
	}
}

func TestGPUResourceRenamed(t *testing.T) {
	res := mustConvert(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: gpu}
spec:
  replica_specs:
  - tf_replica_type: MASTER
    template:
      spec:
        containers:
        - name: tensorflow
          image: x
          resources: {limits: {alpha.kubernetes.io/nvidia-gpu: 2}}`)
	limits := tf(res).Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Resources.Limits
	if q, ok := limits[corev1.ResourceName("nvidia.com/gpu")]; !ok || q.Value() != 2 || len(limits) != 1 {
		t.Errorf("limits = %v", limits)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	const old = "apiVersion: mlkube.io/v1beta1\nkind: TfJob\nmetadata: {name: a}\n"
	const kubeflow = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: a}\n"
	const tmpl = "{spec: {containers: [{name: tensorflow, image: x}]}}"
	for _, tc := range []struct{ manifest, want string }{
		{old + "spec:\n  replica_specs:\n  - {replicas: two, template: " + tmpl + "}",
			`spec.replica_specs[0].replicas: "two" is not a whole number`},
		{old + "spec:\n  replica_specs:\n  - {replicas: 1.5, template: " + tmpl + "}",
			`spec.replica_specs[0].replicas: 1.5 is not a whole number`},
		{old + "spec:\n  replica_specs:\n  - {tf_replica_type: WORKER}",
			`spec.replica_specs[0].template is missing`},
		{old + "spec:\n  replica_specs:\n  - {template: {spec: {containers: {name: tensorflow}}}}",
			`spec.replica_specs[0].template.spec.containers: is an object, which does not fit a []v1.Container`},
		{old + "spec:\n  replica_specs:\n  - {template: {spec: {containers: [{name: tensorflow, image: 7}]}}}",
			`spec.replica_specs[0].template.spec.containers.image: is a number`},
		{old + "spec:\n  replica_specs:\n  - {template: " + tmpl + "}\n  replicaSpecs: []",
			`spec: both replicaSpecs and replica_specs are set`},
		{old + "spec:\n  replica_specs: {MASTER: {}}", `spec.replica_specs: is an object, not a list`},
		{old + "spec:\n  replica_specs: []", `spec.replica_specs: is empty`},
		{old + "spec: {}", `spec.replicaSpecs is missing`},
		{old + "spec:\n  tfReplicaSpecs: {}", `set apiVersion: kubeflow.org/v1`},
		{old + "status: {}", `spec is missing`},
		{old + "spec:\n  replica_specs:\n  - {replicas: 0, template: " + tmpl + "}", `spec.replica_specs: every group has replicas: 0`},
		{old + "spec:\n  terminationPolicy: {chief: {replicaName: MASTER, replicaIndex: first}}\n  replicaSpecs:\n  - {template: " + tmpl + "}", `spec.terminationPolicy.chief.replicaIndex: "first" is not a whole number`},
		{"apiVersion: mlkube.io/v1beta1\nkind: TfJob\nmetadata: {name: a, labels: {version: 2}}\nspec:\n  replica_specs:\n  - {template: " + tmpl + "}", `metadata.labels: is a number, which does not fit a string`},
		{kubeflow + "spec:\n  tfReplicaSpecs:\n    Boss: {template: " + tmpl + "}", `spec.tfReplicaSpecs.Boss: "Boss" is not one of Chief, Master, Worker, PS, Evaluator`},
		{kubeflow + "spec:\n  tfReplicaSpecs:\n    Worker: {template: " + tmpl + "}\n    worker: {template: " + tmpl + "}", `spec.tfReplicaSpecs: Worker and worker name the same replica type`},
		{kubeflow + "spec:\n  tfReplicaSpecs:\n    PS: {replicas: 2}", `spec.tfReplicaSpecs.PS.template is missing`},
		{kubeflow + "spec:\n  tfReplicaSpecs:\n    Worker: {replicas: 0, template: " + tmpl + "}", `spec.tfReplicaSpecs: has no replica group with a replica to run`},
		{kubeflow + "spec:\n  tfReplicaSpecs: [{template: " + tmpl + "}]", `spec.tfReplicaSpecs: is a list, not an object`},
		{kubeflow + "spec:\n  replicaSpecs: [{template: " + tmpl + "}]", `spec.tfReplicaSpecs is missing; spec.replicaSpecs is the list form`},
		{kubeflow + "spec:\n  enableDynamicWorker: yes please\n  tfReplicaSpecs: {Worker: {template: " + tmpl + "}}", `spec.enableDynamicWorker: is "yes please", not true or false`},
	} {
		_, err := Convert([]byte(tc.manifest))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Convert of\n%s\nerror: %v\nwant one holding: %s", tc.manifest, err, tc.want)
		}
	}
}

func TestGarbageIsAnError(t *testing.T) {
	for name, input := range map[string]string{
		"empty":            "",
		"blank":            " \n\t\n",
		"comments only":    "# nothing\n---\n# still nothing\n",
		"random bytes":     "\x00\x9f\x92\x96\xff\xfe{{[[:::",
		"not yaml":         "a: b: c",
		"a YAML list":      "- apiVersion: mlkube.io/v1beta1\n  kind: TfJob\n",
		"a JSON array":     `[{"apiVersion": "mlkube.io/v1beta1"}]`,
		"a scalar":         "42",
		"a string":         "hello",
		"a List":           "apiVersion: v1\nkind: List\nitems: []\n",
		"a TfJobList":      "apiVersion: mlkube.io/v1beta1\nkind: TfJobList\nitems: []\n",
		"two documents":    "apiVersion: mlkube.io/v1beta1\nkind: TfJob\n---\napiVersion: mlkube.io/v1beta1\nkind: TfJob\n",
		"a Deployment":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {}\n",
		"a JAXJob":         "apiVersion: kubeflow.org/v1\nkind: JAXJob\nspec: {}\n",
		"empty PyTorchJob": "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec: {}\n",
		"no kind":          "apiVersion: mlkube.io/v1beta1\nspec: {}\n",
		"kind not string":  "apiVersion: mlkube.io/v1beta1\nkind: [TfJob]\n",
		"duplicate keys":   "apiVersion: mlkube.io/v1beta1\nkind: TfJob\nkind: TfJob\n",
		"spec a string":    "apiVersion: mlkube.io/v1beta1\nkind: TfJob\nspec: fast\n",
		"metadata a list":  "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: [a]\nspec: {}\n",
		"groups not maps":  "apiVersion: tensorflow.org/v1alpha1\nkind: TfJob\nspec: {replicaSpecs: [1, 2]}\n",
		"template numbers": "apiVersion: tensorflow.org/v1alpha1\nkind: TfJob\nspec: {replicaSpecs: [{template: 3}]}\n",
		"bad separator":    "apiVersion: v1\n--- nope\nkind: TfJob\n",
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Convert([]byte(input))
			if err == nil {
				t.Fatalf("Convert(%q) = %+v, want an error", input, res)
			}
			if err.Error() == "" || strings.Contains(err.Error(), "a bug in devctl") {
				t.Errorf("Convert(%q) error: %q", input, err)
			}
			t.Log(err)
		})
	}
	_, err := Convert([]byte("apiVersion: apps/v1\nkind: Deployment\n"))
	for _, accepted := range []string{"mlkube.io/v1beta1 TfJob", "tensorflow.org/v1alpha1 TfJob", "kubeflow.org/v1alpha1 TFJob", "kubeflow.org/v1 TFJob",
		"fioravanzo.org/v1alpha1 MXJob", "kubeflow.org/v1 MXJob", "mlkube.io/v1beta1 PyTorchJob", "kubeflow.org/v1 PyTorchJob"} {
		if err == nil || !strings.Contains(err.Error(), accepted) {
			t.Errorf("the error for a Deployment does not list %s: %v", accepted, err)
		}
	}
}

func TestSplit(t *testing.T) {
	docs, err := Split([]byte("# a comment\n---\napiVersion: v1\nkind: A\n---\n---\napiVersion: v1\nkind: B\n"))
	if err != nil || len(docs) != 2 {
		t.Fatalf("Split = %d documents, %v; want 2", len(docs), err)
	}
	if !strings.Contains(string(docs[1]), "kind: B") {
		t.Errorf("second document: %q", docs[1])
	}
}

func TestYAMLIsClean(t *testing.T) {
	res := mustConvert(t, `
apiVersion: tensorflow.org/v1alpha1
kind: TfJob
metadata: {name: a, uid: x, creationTimestamp: "2017-10-20T22:27:38Z"}
spec:
  replicaSpecs:
  - {tfReplicaType: MASTER, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: tensorflow, image: x}], volumes: [{name: scratch, emptyDir: {}}]}}}
  - {tfReplicaType: WORKER, template: {spec: {containers: [{name: tensorflow, image: x}]}}}
status: {phase: Done}`)
	y, err := YAML(res.Job)
	if err != nil {
		t.Fatal(err)
	}
	s := string(y)
	for _, unwanted := range []string{"status", "creationTimestamp", "uid", "resources: {}", "metadata: {}", "runPolicy: {}", "null"} {
		if strings.Contains(s, unwanted) {
			t.Errorf("YAML holds %q:\n%s", unwanted, s)
		}
	}
	for _, wanted := range []string{"apiVersion: mlkube.io/v1beta1\n", "kind: TfJob\n", "emptyDir: {}", "a: b"} {
		if !strings.Contains(s, wanted) {
			t.Errorf("YAML lacks %q:\n%s", wanted, s)
		}
	}
	// YAML sets apiVersion and kind even on a job built in Go without them.
	bare := tf(res).DeepCopy()
	bare.APIVersion, bare.Kind = "", ""
	if y2, err := YAML(bare); err != nil || string(y2) != s {
		t.Errorf("YAML of the job without apiVersion and kind differs (%v):\n%s", err, y2)
	}
}

// A manifest is read strictly, though a job decodes leniently from a cluster (an unreadable
// job must not fail a list): a value today's Go type cannot hold (of another type, past 32 bits,
// or a 0 that would read as unset) is an error naming the field, never a job with its spec left
// empty or the value changed. Where the CRD has a rule for the value, the error is in its words.
func TestAValueItsFieldCannotHoldIsAnError(t *testing.T) {
	const current = "apiVersion: mlkube.io/v1beta1\nkind: TfJob\nmetadata: {name: x}\nspec:\n"
	const old = "apiVersion: mlkube.io/v1beta1\nkind: TfJob\nmetadata: {name: x}\nspec:\n  replica_specs:\n"
	const kubeflow = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: x}\nspec:\n"
	const tmpl = "{spec: {containers: [{name: tensorflow, image: trainer}]}}"
	for _, tc := range []struct{ manifest, want string }{
		{current + "  runPolicy: {ttlSecondsAfterFinished: 2592000000}\n  replicaSpecs:\n  - {tfReplicaType: WORKER, template: " + tmpl + "}",
			"spec.runPolicy.ttlSecondsAfterFinished: should be less than or equal to 2147483647 (got 2592000000)"},
		{current + "  runPolicy: {backoffLimit: three}\n  replicaSpecs:\n  - {tfReplicaType: WORKER, template: " + tmpl + "}",
			`spec.runPolicy.backoffLimit: "three" is not a whole number`},
		{current + "  replicaSpecs:\n  - tfReplicaType: WORKER\n    template: {spec: {containers: [{name: tensorflow, image: trainer, ports: [{containerPort: 3000000000}]}]}}",
			"containerPort"},
		{kubeflow + "  backoffLimit: 99999999999\n  tfReplicaSpecs: {Worker: {template: " + tmpl + "}}",
			"spec.backoffLimit: should be less than or equal to 2147483647 (got 99999999999)"},
		{old + "  - {tf_port: 0, template: " + tmpl + "}", "spec.replica_specs[0].tf_port: should be greater than or equal to 1 (got 0)"},
		{old + "  - {tf_port: 4294967296, template: " + tmpl + "}", "spec.replica_specs[0].tf_port: should be less than or equal to 65535 (got 4294967296)"},
		{old + "  - {tf_port: two, template: " + tmpl + "}", `spec.replica_specs[0].tf_port: "two" is not a whole number`},
		{old + "  - {replicas: 4294967297, template: " + tmpl + "}", "spec.replica_specs[0].replicas: should be less than or equal to 10000 (got 4294967297)"},
		{old + "  - {replicas: 1e20, template: " + tmpl + "}", "spec.replica_specs[0].replicas: 100000000000000000000 is not a whole number that fits 64 bits"},
		{old + "  - {tf_replica_type: 1, template: " + tmpl + "}", "spec.replica_specs[0].tf_replica_type: is 1, not a string"},
	} {
		res, err := Convert([]byte(tc.manifest))
		if err == nil {
			t.Errorf("%s\nconverted, want an error naming the field; job %+v", tc.manifest, res.Job)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\nerror %q, want it to say %q", tc.manifest, err, tc.want)
		}
	}
}

// Convert checks no range or enum of today's API: a value out of one, in any form, reaches the
// converted job as written, and the CRD's refusal of it reaches the person, in its words (what
// the field takes) at the field of today's job, and where the manifest had it when that differs.
func TestTheCRDSaysWhatIsOutOfRange(t *testing.T) {
	const snake = "apiVersion: mlkube.io/v1beta1\nkind: TfJob\nmetadata: {name: a}\nspec:\n"
	const kubeflow = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: a}\nspec:\n"
	const tmpl = "{spec: {containers: [{name: tensorflow, image: x}]}}"
	for _, tc := range []struct {
		name, manifest string
		field          string // today's, where the CRD refuses the value
		says, from     string // what the refusal says, and where the manifest had the field ("" when there)
		kept           string // the value as written, in the converted job's YAML
	}{{
		name:     "a port past 65535, in a group after one left out",
		manifest: snake + "  replica_specs:\n  - {tf_replica_type: WORKER, replicas: 0, template: " + tmpl + "}\n  - {tf_port: 70000, template: " + tmpl + "}",
		field:    "spec.replicaSpecs[0].tfPort", says: "should be less than or equal to 65535 (got 70000)",
		from: "spec.replica_specs[1].tf_port", kept: "tfPort: 70000",
	}, {
		name:     "negative replicas",
		manifest: snake + "  replica_specs:\n  - {replicas: -1, template: " + tmpl + "}",
		field:    "spec.replicaSpecs[0].replicas", says: "should be greater than or equal to 1 (got -1)",
		from: "spec.replica_specs[0].replicas", kept: "replicas: -1",
	}, {
		name:     "a replica type misspelt",
		manifest: snake + "  replica_specs:\n  - {template: " + tmpl + "}\n  - {tf_replica_type: CHEF, template: " + tmpl + "}",
		field:    "spec.replicaSpecs[1].tfReplicaType", says: `Unsupported value: "CHEF": supported values: "MASTER", "CHIEF"`,
		from: "spec.replica_specs[1].tf_replica_type", kept: "tfReplicaType: CHEF",
	}, {
		name:     "a pod's restartPolicy misspelt, moved to the group",
		manifest: snake + "  replica_specs:\n  - {template: {spec: {restartPolicy: Sometimes, containers: [{name: tensorflow, image: x}]}}}",
		field:    "spec.replicaSpecs[0].restartPolicy", says: `Unsupported value: "Sometimes": supported values: "ExitCode"`,
		from: "spec.replica_specs[0].template.spec.restartPolicy", kept: "restartPolicy: Sometimes",
	}, {
		name:     "TensorBoard without logDir",
		manifest: snake + "  tensor_board: {service_type: NodePort}\n  replica_specs:\n  - {template: " + tmpl + "}",
		field:    "spec.tensorboard.logDir", says: "should be at least 1 chars long",
		from: "spec.tensor_board", kept: "serviceType: NodePort",
	}, {
		name:     "a TensorBoard service type misspelt",
		manifest: snake + "  tensor_board: {log_dir: /l, service_type: Internal}\n  replica_specs:\n  - {template: " + tmpl + "}",
		field:    "spec.tensorboard.serviceType", says: `Unsupported value: "Internal": supported values: "ClusterIP", "NodePort", "LoadBalancer"`,
		from: "spec.tensor_board.service_type", kept: "serviceType: Internal",
	}, {
		name:     "kubeflow.org/v1alpha1's cleanPodPolicy misspelt",
		manifest: "apiVersion: kubeflow.org/v1alpha1\nkind: TFJob\nmetadata: {name: a}\nspec:\n  cleanPodPolicy: CleanSome\n  replicaSpecs:\n  - {template: " + tmpl + "}",
		field:    "spec.runPolicy.cleanPodPolicy", says: `Unsupported value: "CleanSome": supported values: "Running", "All", "None"`,
		from: "spec.cleanPodPolicy", kept: "cleanPodPolicy: CleanSome",
	}, {
		name:     "Kubeflow's restartPolicy misspelt",
		manifest: kubeflow + "  tfReplicaSpecs:\n    Worker: {restartPolicy: Sometimes, template: " + tmpl + "}",
		field:    "spec.replicaSpecs[0].restartPolicy", says: `Unsupported value: "Sometimes"`,
		from: "spec.tfReplicaSpecs.Worker.restartPolicy", kept: "restartPolicy: Sometimes",
	}, {
		name:     "Kubeflow's port past 65535, from the container's",
		manifest: kubeflow + "  tfReplicaSpecs:\n    Worker: {template: {spec: {containers: [{name: tensorflow, image: x, ports: [{name: tfjob-port, containerPort: 70000}]}]}}}",
		field:    "spec.replicaSpecs[0].tfPort", says: "should be less than or equal to 65535 (got 70000)",
		from: "spec.tfReplicaSpecs.Worker.template.spec.containers[0].ports[0].containerPort", kept: "tfPort: 70000",
	}, {
		name:     "run policy minimums",
		manifest: kubeflow + "  runPolicy: {activeDeadlineSeconds: 0, backoffLimit: -1}\n  tfReplicaSpecs: {Worker: {template: " + tmpl + "}}",
		field:    "spec.runPolicy.activeDeadlineSeconds", says: "should be greater than or equal to 1 (got 0)",
		kept: "activeDeadlineSeconds: 0",
	}, {
		name:     "a run policy field at the top of the spec, as Kubeflow's v1alpha2 had it",
		manifest: "apiVersion: kubeflow.org/v1alpha2\nkind: TFJob\nmetadata: {name: a}\nspec:\n  ttlSecondsAfterFinishing: -5\n  tfReplicaSpecs: {Worker: {template: " + tmpl + "}}",
		field:    "spec.runPolicy.ttlSecondsAfterFinished", says: "should be greater than or equal to 0 (got -5)",
		from: "spec.ttlSecondsAfterFinishing", kept: "ttlSecondsAfterFinished: -5",
	}, {
		name:     "the fork's mxPort past 65535",
		manifest: "apiVersion: fioravanzo.org/v1alpha1\nkind: MXJob\nmetadata: {name: a}\nspec:\n  replicaSpecs:\n  - {mxPort: 70000, template: " + mxTmpl + "}",
		field:    "spec.replicaSpecs[0].port", says: "should be less than or equal to 65535 (got 70000)",
		from: "spec.replicaSpecs[0].mxPort", kept: "port: 70000",
	}, {
		name:     "an MXJob replica type of TensorFlow's",
		manifest: "apiVersion: fioravanzo.org/v1alpha1\nkind: MXJob\nmetadata: {name: a}\nspec:\n  replicaSpecs:\n  - {template: " + mxTmpl + "}\n  - {mxReplicaType: PS, template: " + mxTmpl + "}",
		field:    "spec.replicaSpecs[1].mxReplicaType", says: `Unsupported value: "PS": supported values: "SCHEDULER", "SERVER", "WORKER"`,
		kept: "mxReplicaType: PS",
	}, {
		name:     "a PyTorchJob replica type of TensorFlow's",
		manifest: "apiVersion: mlkube.io/v1beta1\nkind: PyTorchJob\nmetadata: {name: a}\nspec:\n  replicaSpecs:\n  - {pytorchReplicaType: MASTER, template: " + ptTmpl + "}\n  - {pytorchReplicaType: CHIEF, template: {spec: {restartPolicy: Never, containers: [{name: pytorch, image: x}]}}}",
		field:    "spec.replicaSpecs[1].pytorchReplicaType", says: `Unsupported value: "CHIEF": supported values: "MASTER", "WORKER"`,
		kept: "pytorchReplicaType: CHIEF",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustConvert(t, tc.manifest)
			var at *field.Error
			for _, e := range res.Invalid {
				if e.Field == tc.field {
					at = e
				}
			}
			if at == nil {
				t.Fatalf("the CRD refuses nothing at %s: %v", tc.field, res.Invalid)
			}
			want := []string{tc.field + ": " + tc.says}
			if tc.from != "" {
				want = append(want, "; in the manifest, "+tc.from)
			} else if hasWarning(res, tc.field, "; in the manifest, ") {
				t.Errorf("a refusal names the field twice over; warnings:\n%s", strings.Join(res.Warnings, "\n"))
			}
			assertRefusals(t, res, want)
			y, err := YAML(res.Job)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(y), tc.kept) {
				t.Errorf("the converted job lacks %q:\n%s", tc.kept, y)
			}
		})
	}
}

// A quantity written as an unquoted number, `cpu: 0.5`, is what a Pod takes, and the CRD's
// schema refuses (must be of type integer,string: "number"). devctl reads it as the Go type
// does and sends it as that type writes it, "500m": the job runs as a Pod would, and no
// refusal is warned of.
func TestUnquotedFractionRunsAsInAPod(t *testing.T) {
	res := mustConvert(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata: {name: half}
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    template:
      spec:
        containers:
        - name: tensorflow
          image: x
          resources: {requests: {cpu: 0.5, memory: 1.5e9}}`)
	if len(res.Invalid) != 0 || len(res.Warnings) != 0 {
		t.Errorf("refusals %v, warnings %q; want none", res.Invalid, res.Warnings)
	}
	requests := tf(res).Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Resources.Requests
	if cpu, mem := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]; cpu.String() != "500m" || mem.String() != "1500M" {
		t.Errorf("requests = %v, want cpu 500m and memory 1500M", requests)
	}
}
