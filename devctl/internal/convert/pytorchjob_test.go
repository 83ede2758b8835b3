package convert

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// pt is the PyTorchJob of a result.
func pt(res *Result) *v1beta1.PyTorchJob { return res.Job.(*v1beta1.PyTorchJob) }

const ptTmpl = "{spec: {containers: [{name: pytorch, image: x}]}}"

func TestPyTorchJobFormsAndDefaults(t *testing.T) {
	checkForms(t, []formCase{{
		name: "kubeflow.org/v1: keys in any case, the pytorchjob-port, unset restartPolicy is OnFailure, Kubeflow's",
		manifest: `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt}
spec:
  pytorchReplicaSpecs:
    WORKER: {replicas: 3, restartPolicy: Never, template: ` + ptTmpl + `}
    master: {template: {spec: {containers: [{name: pytorch, image: x, ports: [{name: pytorchjob-port, containerPort: 29500}]}]}}}`,
		from:   "kubeflow.org/v1 PyTorchJob",
		groups: []group{{"MASTER", 1, 29500, "OnFailure"}, {"WORKER", 3, 23456, "Never"}},
		warnings: [][]string{
			{"spec.pytorchReplicaSpecs.master: no restartPolicy, so OnFailure, Kubeflow's default", "restarts a failed container in place"},
		},
	}, {
		name: "kubeflow.org/v1beta2, the run policy at the top of the spec, a Worker of no replicas",
		manifest: `
apiVersion: kubeflow.org/v1beta2
kind: PyTorchJob
metadata: {name: pt}
spec:
  cleanPodPolicy: All
  activeDeadlineSeconds: 600
  pytorchReplicaSpecs:
    Master: {restartPolicy: ExitCode, template: ` + ptTmpl + `}
    Worker: {replicas: 0, restartPolicy: ExitCode, template: ` + ptTmpl + `}`,
		from:   "kubeflow.org/v1beta2 PyTorchJob",
		groups: []group{{"MASTER", 1, 23456, "ExitCode"}},
		warnings: [][]string{
			{"spec.pytorchReplicaSpecs.Worker has replicas: 0: left out, as today's PyTorchJob runs at least one replica per group"},
		},
	}, {
		name: "mlkube.io/v1beta1 PyTorchJob that is not quite today's: a group of no replicas, restartPolicy in a template",
		manifest: `
apiVersion: mlkube.io/v1beta1
kind: PyTorchJob
metadata: {name: pt}
spec:
  replicaSpecs:
  - {pytorchReplicaType: MASTER, template: {spec: {containers: [{name: pytorch, image: x}], restartPolicy: OnFailure}}}
  - {pytorchReplicaType: WORKER, replicas: 0, port: 29500, template: ` + ptTmpl + `}
  runPolicy: {backoffLimit: 1}`,
		from:   "mlkube.io/v1beta1 PyTorchJob (not in today's form)",
		groups: []group{{"MASTER", 1, 23456, "OnFailure"}},
		warnings: [][]string{
			{"converted mlkube.io/v1beta1 PyTorchJob (not in today's form) to today's form"},
			{"spec.replicaSpecs[1] (WORKER) has replicas: 0: left out"},
			{"spec.replicaSpecs[0]: moved restartPolicy: OnFailure from the pod template"},
		},
	}})
}

// Kubeflow's fields with no mlkube equivalent are dropped, saying why, as are the run policy's;
// the run policy itself carries over, suspend included.
func TestPyTorchJobDroppedFields(t *testing.T) {
	res := mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt}
spec:
  elasticPolicy: {rdzvBackend: c10d, minReplicas: 1, maxReplicas: 4, maxRestarts: 3}
  nprocPerNode: auto
  runPolicy:
    cleanPodPolicy: Running
    backoffLimit: 2
    suspend: true
    schedulingPolicy: {minAvailable: 2}
  pytorchReplicaSpecs:
    Master: {restartPolicy: OnFailure, template: `+ptTmpl+`}`)
	for _, parts := range [][]string{
		{"dropped spec.elasticPolicy:", "elastic rendezvous", "no equivalent"},
		{"dropped spec.nprocPerNode: auto:", "one process per pod"},
		{"dropped spec.runPolicy.schedulingPolicy"},
	} {
		if !hasWarning(res, parts...) {
			t.Errorf("no warning holds %q; warnings:\n%s", parts, strings.Join(res.Warnings, "\n"))
		}
	}
	if hasWarning(res, "suspend") {
		t.Errorf("runPolicy.suspend carries over, yet a warning names it:\n%s", strings.Join(res.Warnings, "\n"))
	}
	if p := pt(res).Spec.RunPolicy; p.CleanPodPolicy != "Running" || p.BackoffLimit == nil || *p.BackoffLimit != 2 || !p.Suspended() {
		t.Errorf("runPolicy = %+v", p)
	}
	// A number is dropped as well as Kubeflow's string; false and empty values say nothing.
	res = mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt}
spec:
  nprocPerNode: 4
  elasticPolicy: {}
  pytorchReplicaSpecs:
    Master: {restartPolicy: OnFailure, template: `+ptTmpl+`}`)
	if !hasWarning(res, "dropped spec.nprocPerNode: 4:") || hasWarning(res, "elasticPolicy") {
		t.Errorf("warnings:\n%s", strings.Join(res.Warnings, "\n"))
	}
}

// Kubeflow ran elastic jobs of workers alone; today's PyTorchJob needs its MASTER, and the
// conversion says so in the apiserver's words rather than making a worker the master.
func TestPyTorchJobWithoutMasterIsWarned(t *testing.T) {
	res := mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: elastic}
spec:
  elasticPolicy: {minReplicas: 2, maxReplicas: 4}
  pytorchReplicaSpecs:
    Worker: {replicas: 4, template: {spec: {containers: [{name: trainer, image: x}]}}}`)
	assertRefusals(t, res,
		[]string{"spec: replicaSpecs needs a MASTER group: it is rank 0"},
		[]string{"spec.replicaSpecs[0].template.spec.containers: needs a container named 'pytorch'"},
	)
	if g := groupsOf(t, res.Job); len(g) != 1 || g[0].typ != "WORKER" || g[0].replicas != 4 {
		t.Errorf("groups = %v", g)
	}
}

func TestPyTorchJobErrorsNameTheField(t *testing.T) {
	const kf = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: a}\n"
	const current = "apiVersion: mlkube.io/v1beta1\nkind: PyTorchJob\nmetadata: {name: a}\n"
	for _, tc := range []struct{ manifest, want string }{
		{kf + "spec:\n  pytorchReplicaSpecs:\n    Chief: {template: " + ptTmpl + "}",
			`spec.pytorchReplicaSpecs.Chief: "Chief" is not one of Master, Worker`},
		{kf + "spec:\n  pytorchReplicaSpecs:\n    Master: {template: " + ptTmpl + "}\n    master: {template: " + ptTmpl + "}",
			`spec.pytorchReplicaSpecs: Master and master name the same replica type`},
		{kf + "spec:\n  pytorchReplicaSpecs:\n    Master: {replicas: 1}", `spec.pytorchReplicaSpecs.Master.template is missing`},
		{kf + "spec:\n  pytorchReplicaSpecs: [{template: " + ptTmpl + "}]", `spec.pytorchReplicaSpecs: is a list, not an object`},
		{kf + "spec:\n  replicaSpecs: [{template: " + ptTmpl + "}]",
			`spec.pytorchReplicaSpecs is missing; spec.replicaSpecs is the list form of mlkube.io/v1beta1 PyTorchJob: set apiVersion: mlkube.io/v1beta1`},
		{kf + "spec:\n  runPolicy: {ttlSecondsAfterFinished: -2147483649}\n  pytorchReplicaSpecs: {Master: {template: " + ptTmpl + "}}",
			`spec.runPolicy.ttlSecondsAfterFinished: should be greater than or equal to 0 (got -2147483649)`},
		{kf + "spec:\n  pytorchReplicaSpecs:\n    Master: {replicas: 0, template: " + ptTmpl + "}", `spec.pytorchReplicaSpecs: has no replica group with a replica to run`},
		{current + "spec:\n  replicaSpecs:\n  - {port: 1, template: " + ptTmpl + "}",
			`spec.replicaSpecs[0].pytorchReplicaType is missing: it is one of MASTER, WORKER`},
		{current + "spec:\n  replicaSpecs:\n  - {pytorchReplicaType: CHIEF, replicas: 0, template: " + ptTmpl + "}",
			`spec.replicaSpecs: every group has replicas: 0`},
		{current + "spec:\n  replicaSpecs:\n  - {pytorchReplicaType: MASTER, replicas: 2}",
			`spec.replicaSpecs[0].template is missing: every replica group needs the pod it runs`},
		{current + "spec:\n  pytorchReplicaSpecs: {Master: {template: " + ptTmpl + "}}",
			`spec.replicaSpecs is missing; spec.pytorchReplicaSpecs is the form of kubeflow.org/v1 PyTorchJob: set apiVersion: kubeflow.org/v1 and kind: PyTorchJob`},
	} {
		_, err := Convert([]byte(tc.manifest))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Convert of\n%s\nerror: %v\nwant one holding: %s", tc.manifest, err, tc.want)
		}
	}
}
