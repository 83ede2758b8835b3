package tfjob_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests need no operator: the apiserver alone refuses bad TfJobs, from the CRD's OpenAPI
// schema (enums, minimums, list types) and its CEL rules (x-kubernetes-validations).

// A jobEdit changes a job, given as the JSON object the client sends. Working on the JSON and
// not the Go type is what lets a test send values such as replicas: 0, which omitempty would drop
// (and the apiserver would then default to 1).
type jobEdit func(t *testing.T, obj map[string]any)

// typedEdit changes the job as a v1beta1.TfJob, for changes the Go type can express.
func typedEdit(f func(*v1beta1.TfJob)) jobEdit {
	return func(t *testing.T, obj map[string]any) {
		t.Helper()
		var job v1beta1.TfJob
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &job))
		f(&job)
		out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&job)
		must(t, err)
		clear(obj)
		for k, v := range out {
			obj[k] = v
		}
	}
}

// setField sets the field at path, e.g. setField(int64(-1), "spec", "runPolicy", "backoffLimit").
func setField(value any, path ...string) jobEdit {
	return func(t *testing.T, obj map[string]any) {
		t.Helper()
		must(t, unstructured.SetNestedField(obj, value, path...))
	}
}

// removeField deletes the field at path.
func removeField(path ...string) jobEdit {
	return func(_ *testing.T, obj map[string]any) { unstructured.RemoveNestedField(obj, path...) }
}

// inGroup applies e to replica group i (standardJob's are 0 MASTER, 1 WORKER, 2 PS), so that
// paths are relative to the group: inGroup(1, setField(int64(0), "replicas")).
func inGroup(i int, e jobEdit) jobEdit {
	return func(t *testing.T, obj map[string]any) {
		t.Helper()
		groups, _, err := unstructured.NestedSlice(obj, "spec", "replicaSpecs")
		must(t, err)
		if i >= len(groups) {
			t.Fatalf("job has %d replica groups, no group %d", len(groups), i)
		}
		e(t, groups[i].(map[string]any))
		must(t, unstructured.SetNestedSlice(obj, groups, "spec", "replicaSpecs"))
	}
}

// inFirstContainer applies e to the first container of a replica group's template, so that
// paths are relative to it.
func inFirstContainer(e jobEdit) jobEdit {
	return func(t *testing.T, group map[string]any) {
		t.Helper()
		containers, _, err := unstructured.NestedSlice(group, "template", "spec", "containers")
		must(t, err)
		e(t, containers[0].(map[string]any))
		must(t, unstructured.SetNestedSlice(group, containers, "template", "spec", "containers"))
	}
}

// allEdits applies edits in turn.
func allEdits(edits ...jobEdit) jobEdit {
	return func(t *testing.T, obj map[string]any) {
		t.Helper()
		for _, e := range edits {
			e(t, obj)
		}
	}
}

// unstructuredJob is standardJob(ns, name) after edits, ready to send.
func unstructuredJob(t *testing.T, ns, name string, edits ...jobEdit) *unstructured.Unstructured {
	t.Helper()
	job := standardJob(ns, name)
	job.APIVersion, job.Kind = v1beta1.GroupVersion.String(), "TfJob"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	must(t, err)
	for _, e := range edits {
		e(t, obj)
	}
	return &unstructured.Unstructured{Object: obj}
}

// refusedFor checks that err is the apiserver refusing a job as invalid, and that one of the
// causes it lists names the field and says msg.
func refusedFor(t *testing.T, err error, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the apiserver accepted the job; want it refused with %s: %s", field, msg)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error with %s: %s; got %v", field, msg, err)
	}
	// A cause is printed as "<field>: <reason>: <detail>"; checking both parts in one cause (and
	// not anywhere in the whole message) keeps a message from matching on another field's error.
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Field == field && strings.Contains(c.Message, msg) {
				return
			}
		}
	}
	// The admission policy's refusal (operator/admission) has no causes: its one message
	// starts with the field.
	if strings.Contains(err.Error(), "denied request: "+field+": "+msg) {
		return
	}
	t.Errorf("want a cause at %s saying %q; got %v", field, msg, err)
}

func TestInvalidJobsAreRefused(t *testing.T) {
	ns := namespace(t)
	tensorboard := func(tb map[string]any) jobEdit { return setField(tb, "spec", "tensorboard") }
	addGroup := func(typ v1beta1.TfReplicaType) jobEdit {
		return func(t *testing.T, obj map[string]any) {
			t.Helper()
			group, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr.To(replicaGroup(typ, 1)))
			must(t, err)
			groups, _, err := unstructured.NestedSlice(obj, "spec", "replicaSpecs")
			must(t, err)
			must(t, unstructured.SetNestedSlice(obj, append(groups, any(group)), "spec", "replicaSpecs"))
		}
	}

	cases := []struct {
		name string
		job  string // metadata.name; the case name when empty
		// generateName, when set, is sent instead of metadata.name.
		generateName string
		edit         jobEdit
		// field and msg are where and what the apiserver says; both empty means the job is valid.
		field, msg string
		// check looks at a valid job as stored, after the apiserver applied the defaults.
		check func(t *testing.T, job *v1beta1.TfJob)
	}{
		{
			name:  "unknown-replica-type",
			edit:  inGroup(1, setField("BOSS", "tfReplicaType")),
			field: "spec.replicaSpecs[1].tfReplicaType",
			msg:   `Unsupported value: "BOSS": supported values: "MASTER", "CHIEF", "WORKER", "PS", "EVALUATOR"`,
		},
		{
			name:  "master-and-chief",
			edit:  addGroup(v1beta1.TfReplicaChief),
			field: "spec",
			msg:   "at most one of MASTER and CHIEF",
		},
		{
			name:  "two-masters",
			edit:  inGroup(0, setField(int64(2), "replicas")),
			field: "spec.replicaSpecs[0]",
			msg:   "a MASTER or CHIEF group has exactly one replica",
		},
		{
			name:  "two-chiefs",
			edit:  allEdits(inGroup(0, setField("CHIEF", "tfReplicaType")), inGroup(0, setField(int64(3), "replicas"))),
			field: "spec.replicaSpecs[0]",
			msg:   "a MASTER or CHIEF group has exactly one replica",
		},
		{
			name:  "zero-replicas",
			edit:  inGroup(1, setField(int64(0), "replicas")),
			field: "spec.replicaSpecs[1].replicas",
			msg:   "should be greater than or equal to 1",
		},
		{
			name:  "too-many-replicas",
			edit:  inGroup(1, setField(int64(10001), "replicas")),
			field: "spec.replicaSpecs[1].replicas",
			msg:   "should be less than or equal to 10000",
		},
		{
			name:  "port-too-high",
			edit:  inGroup(2, setField(int64(70000), "tfPort")),
			field: "spec.replicaSpecs[2].tfPort",
			msg:   "should be less than or equal to 65535",
		},
		{
			name:  "port-zero",
			edit:  inGroup(2, setField(int64(0), "tfPort")),
			field: "spec.replicaSpecs[2].tfPort",
			msg:   "should be greater than or equal to 1",
		},
		{
			name:  "unknown-restart-policy",
			edit:  inGroup(1, setField("Sometimes", "restartPolicy")),
			field: "spec.replicaSpecs[1].restartPolicy",
			msg:   `Unsupported value: "Sometimes": supported values: "ExitCode", "OnFailure", "Never", "Always"`,
		},
		{
			name:  "container-without-image",
			edit:  inGroup(1, inFirstContainer(removeField("image"))),
			field: "spec.replicaSpecs[1].template.spec.containers[0].image",
			msg:   "Required value",
		},
		{
			name: "init-container-without-image",
			edit: inGroup(2, setField([]any{map[string]any{"name": "fetch", "image": "busybox"}, map[string]any{"name": "setup"}},
				"template", "spec", "initContainers")),
			field: "spec.replicaSpecs[2].template.spec.initContainers[1].image",
			msg:   "Required value",
		},
		{
			name:  "unknown-clean-pod-policy",
			edit:  setField("Some", "spec", "runPolicy", "cleanPodPolicy"),
			field: "spec.runPolicy.cleanPodPolicy",
			msg:   `Unsupported value: "Some": supported values: "Running", "All", "None"`,
		},
		{
			name:  "negative-backoff-limit",
			edit:  typedEdit(func(j *v1beta1.TfJob) { j.Spec.RunPolicy.BackoffLimit = ptr.To(int32(-1)) }),
			field: "spec.runPolicy.backoffLimit",
			msg:   "should be greater than or equal to 0",
		},
		{
			name:  "zero-active-deadline",
			edit:  typedEdit(func(j *v1beta1.TfJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To(int64(0)) }),
			field: "spec.runPolicy.activeDeadlineSeconds",
			msg:   "should be greater than or equal to 1",
		},
		{
			name:  "negative-ttl",
			edit:  typedEdit(func(j *v1beta1.TfJob) { j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To(int32(-5)) }),
			field: "spec.runPolicy.ttlSecondsAfterFinished",
			msg:   "should be greater than or equal to 0",
		},
		{
			// The issue that bounded every integer: the CRD took it, no client could decode it.
			name:  "ttl-beyond-int32",
			edit:  setField(int64(2592000000), "spec", "runPolicy", "ttlSecondsAfterFinished"),
			field: "spec.runPolicy.ttlSecondsAfterFinished",
			msg:   "should be less than or equal to 2147483647",
		},
		{
			name:  "template-port-beyond-int32",
			edit:  inGroup(0, inFirstContainer(setField([]any{map[string]any{"containerPort": int64(3000000000)}}, "ports"))),
			field: "spec.replicaSpecs[0].template.spec.containers[0].ports[0].containerPort",
			msg:   "should be less than or equal to 2147483647",
		},
		{
			name:  "no-tensorflow-container",
			edit:  typedEdit(func(j *v1beta1.TfJob) { j.Spec.ReplicaSpecs[1].Template.Spec.Containers[0].Name = "trainer" }),
			field: "spec.replicaSpecs[1].template.spec.containers",
			msg:   "needs a container named 'tensorflow'",
		},
		{
			name: "only-parameter-servers",
			edit: typedEdit(func(j *v1beta1.TfJob) {
				j.Spec.ReplicaSpecs = []v1beta1.TfReplicaSpec{replicaGroup(v1beta1.TfReplicaPS, 2)}
			}),
			field: "spec",
			msg:   "replicaSpecs needs a MASTER, CHIEF or WORKER group",
		},
		{
			name:  "no-replica-groups",
			edit:  setField([]any{}, "spec", "replicaSpecs"),
			field: "spec.replicaSpecs",
			msg:   "should have at least 1 items",
		},
		{
			name:  "replica-groups-missing",
			edit:  removeField("spec", "replicaSpecs"),
			field: "spec.replicaSpecs",
			msg:   "Required value",
		},
		{
			name:  "same-type-twice",
			edit:  addGroup(v1beta1.TfReplicaWorker),
			field: "spec.replicaSpecs[3]",
			msg:   `Duplicate value: {"tfReplicaType":"WORKER"}`,
		},
		{
			name:  "tensorboard-without-log-dir",
			edit:  tensorboard(map[string]any{"logDir": ""}),
			field: "spec.tensorboard.logDir",
			msg:   "should be at least 1 chars long",
		},
		{
			name:  "tensorboard-ingress",
			edit:  tensorboard(map[string]any{"logDir": "/logs", "serviceType": "Ingress"}),
			field: "spec.tensorboard.serviceType",
			msg:   `Unsupported value: "Ingress": supported values: "ClusterIP", "NodePort", "LoadBalancer"`,
		},
		{
			// The name rules are CEL rules on the root of the object, which the apiserver reports
			// at the field "<nil>"; their messages name metadata.name themselves.
			name:  "long-name",
			job:   "a-job-name-that-is-much-too-long-for-its-services-x", // 51 characters
			field: "<nil>",
			msg:   "metadata.name must be at most 48 characters",
		},
		{
			// The apiserver appends 5 characters to generateName before the CRD's rules see the
			// name: the refusal names generateName, its limit and the name it made.
			name:         "long-generate-name",
			generateName: "a-job-name-that-is-too-long-for-its-hosts-x-", // 44 characters
			field:        "<nil>",
			msg:          "metadata.generateName must be at most 43 characters: the apiserver appends 5 random characters to it to make metadata.name, which must be at most 48",
		},
		{
			name:         "dotted-generate-name",
			generateName: "mnist.v2-",
			field:        "<nil>",
			msg:          "metadata.generateName must start with a letter and hold only lower-case letters, digits and '-': the apiserver appends 5 random letters and digits to it to make metadata.name, which names the job's headless service",
		},
		{
			// No pod could carry it: refused at create, not when the operator makes the pods.
			name:  "label-value-with-slash",
			edit:  inGroup(1, setField(map[string]any{"model": "google/gemma-2-9b"}, "template", "metadata", "labels")),
			field: "spec.replicaSpecs[1].template.metadata.labels.model",
			msg:   `Invalid value: "google/gemma-2-9b"`,
		},
		{
			name:  "label-value-too-long",
			edit:  inGroup(1, setField(map[string]any{"run": strings.Repeat("a", 64)}, "template", "metadata", "labels")),
			field: "spec.replicaSpecs[1].template.metadata.labels.run",
			msg:   "may not be more than 63 bytes",
		},
		{
			// The apiserver's own check of metadata.name (a DNS-1123 subdomain) refuses upper case
			// before the CRD's rules get a say.
			name:  "upper-case-name",
			job:   "Mnist",
			field: "metadata.name",
			msg:   "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
		},
		{
			// A dot passes the apiserver's check of names but not the CRD's rule: the replica
			// services' names are DNS-1035 labels.
			name:  "dotted-name",
			job:   "mnist.v2",
			field: "<nil>",
			msg:   "metadata.name must start with a letter and hold only lower-case letters, digits and '-'",
		},
		{
			name:  "name-starting-with-digit",
			job:   "2mnist",
			field: "<nil>",
			msg:   "metadata.name must start with a letter and hold only lower-case letters, digits and '-'",
		},
		{
			// As the Go client sends it: replicas left out of the master group (0 is omitted), no
			// tfPort, restartPolicy or tensorboard image anywhere, and runPolicy as {}.
			name:  "valid-job-gets-defaults",
			edit:  allEdits(inGroup(0, removeField("replicas")), tensorboard(map[string]any{"logDir": "/logs"})),
			check: checkDefaults,
		},
		{
			// As written by hand in YAML, with no runPolicy at all: it is defaulted to {} and
			// then filled in like any other.
			name:  "valid-job-without-run-policy",
			edit:  allEdits(inGroup(0, removeField("replicas")), removeField("spec", "runPolicy"), tensorboard(map[string]any{"logDir": "/logs"})),
			check: checkDefaults,
		},
		{
			name:  "empty-tensorboard-image",
			edit:  tensorboard(map[string]any{"logDir": "/logs", "image": ""}),
			field: "spec.tensorboard.image",
			msg:   "should be at least 1 chars long",
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.job
			if name == "" {
				name = tc.name
			}
			job := unstructuredJob(t, ns, name)
			if tc.generateName != "" {
				job.SetName("")
				job.SetGenerateName(tc.generateName)
			}
			if tc.edit != nil {
				tc.edit(t, job.Object)
			}
			err := k8s.Create(context.Background(), job)
			if err != nil {
				t.Logf("apiserver: %v", err)
			}
			if tc.field == "" && tc.msg == "" {
				must(t, err)
				tc.check(t, getJob(t, ns, name))
				return
			}
			refusedFor(t, err, tc.field, tc.msg)
		})
	}
}

// checkDefaults checks the defaults the apiserver fills into a job made by unstructuredJob with
// the master's replicas removed and a tensorboard with only logDir.
func checkDefaults(t *testing.T, job *v1beta1.TfJob) {
	t.Helper()
	port := v1beta1.KindOf(job).DefaultPort
	for _, g := range job.Spec.ReplicaSpecs {
		if g.TfPort != port || g.RestartPolicy != v1beta1.RestartPolicyExitCode {
			t.Errorf("%s: tfPort %d restartPolicy %q, want the defaults %d %q",
				g.TfReplicaType, g.TfPort, g.RestartPolicy, port, v1beta1.RestartPolicyExitCode)
		}
	}
	if r := job.Spec.ReplicaSpecs[0].Replicas; r != 1 {
		t.Errorf("MASTER replicas %d, want the default 1", r)
	}
	if tb := job.Spec.Tensorboard; tb == nil || tb.Image != "tensorflow/tensorflow:2.16.1" || tb.ServiceType != "ClusterIP" {
		t.Errorf("tensorboard %+v, want the default image and serviceType ClusterIP", tb)
	}
	if p := job.Spec.RunPolicy.CleanPodPolicy; p != v1beta1.CleanPodPolicyRunning {
		t.Errorf("runPolicy.cleanPodPolicy %q, want the default %q", p, v1beta1.CleanPodPolicyRunning)
	}
}

func TestReplicaSpecsAreImmutable(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	must(t, k8s.Create(ctx, standardJob(ns, "mnist")))

	job := getJob(t, ns, "mnist")
	job.Spec.ReplicaSpecs[1].Replicas = 3
	err := k8s.Update(ctx, job)
	if err != nil {
		t.Logf("apiserver: %v", err)
	}
	refusedFor(t, err, "spec.replicaSpecs", "replicaSpecs cannot change unless the job is suspended")

	job = getJob(t, ns, "mnist")
	job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Image = "mlkube/trainer:v2"
	refusedFor(t, k8s.Update(ctx, job), "spec.replicaSpecs", "replicaSpecs cannot change unless the job is suspended")

	job = getJob(t, ns, "mnist")
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To(int32(600))
	job.Spec.RunPolicy.BackoffLimit = ptr.To(int32(5))
	must(t, k8s.Update(ctx, job))
	job = getJob(t, ns, "mnist")
	if ttl := job.Spec.RunPolicy.TTLSecondsAfterFinished; ttl == nil || *ttl != 600 {
		t.Errorf("runPolicy.ttlSecondsAfterFinished %v after the update, want 600", ttl)
	}
	if g := job.Spec.ReplicaSpecs[1]; g.Replicas != 2 {
		t.Errorf("WORKER replicas %d, want the 2 it was created with", g.Replicas)
	}
}
