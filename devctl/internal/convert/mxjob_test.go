package convert

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// mx is the MXJob of a result.
func mx(res *Result) *v1beta1.MXJob { return res.Job.(*v1beta1.MXJob) }

const mxTmpl = "{spec: {containers: [{name: mxnet, image: x}]}}"

func TestMXJobFormsAndDefaults(t *testing.T) {
	checkForms(t, []formCase{{
		name: "the fork: no type is the SCHEDULER, no mxPort is 9000, the template's restartPolicy moves up",
		manifest: `
apiVersion: fioravanzo.org/v1alpha1
kind: MXJob
metadata: {name: fork}
spec:
  replicaSpecs:
  - template: {spec: {containers: [{name: mxnet, image: x}], restartPolicy: OnFailure}}
  - {mxReplicaType: SERVER, replicas: 2, template: ` + mxTmpl + `}
  - {mxReplicaType: WORKER, replicas: 3, template: ` + mxTmpl + `}`,
		from:   "fioravanzo.org/v1alpha1 MXJob",
		groups: []group{{"SCHEDULER", 1, 9000, "OnFailure"}, {"SERVER", 2, 9000, ""}, {"WORKER", 3, 9000, ""}},
		warnings: [][]string{
			{"spec.replicaSpecs[0] has no mxReplicaType: it is a SCHEDULER, the fork's default"},
			{"no mxPort, so 9000, the fork's default"},
			{"spec.replicaSpecs[0]: moved restartPolicy: OnFailure"},
		},
	}, {
		name: "the fork: the scheduler not first, ports that differ",
		manifest: `
apiVersion: fioravanzo.org/v1alpha1
kind: MXJob
metadata: {name: fork}
spec:
  replicaSpecs:
  - {mxReplicaType: WORKER, mxPort: 9001, template: ` + mxTmpl + `}
  - {mxReplicaType: SCHEDULER, mxPort: 9000, template: ` + mxTmpl + `}`,
		from:   "fioravanzo.org/v1alpha1 MXJob",
		groups: []group{{"WORKER", 1, 9001, ""}, {"SCHEDULER", 1, 9000, ""}},
		warnings: [][]string{
			{"replica 0 of the first group (here WORKER) as DMLC_PS_ROOT_URI"},
			{"different ports (SCHEDULER on 9000, WORKER on 9001)", "DMLC_PS_ROOT_PORT"},
		},
	}, {
		name: "Kubeflow's v1alpha1: PsRootPort (any spelling), no type is a WORKER, worker 0 decided",
		manifest: `
apiVersion: kubeflow.org/v1alpha1
kind: MXJob
metadata: {name: kf}
spec:
  cleanupPodPolicy: All
  schedulerName: volcano
  replicaSpecs:
  - {mxReplicaType: SCHEDULER, PsRootPort: 9000, template: ` + mxTmpl + `}
  - {mxReplicaType: SERVER, psRootPort: 9092, template: ` + mxTmpl + `}
  - {template: ` + mxTmpl + `}`,
		from:   "kubeflow.org/v1alpha1 MXJob",
		groups: []group{{"SCHEDULER", 1, 9000, ""}, {"SERVER", 1, 9092, ""}, {"WORKER", 1, 9091, ""}},
		warnings: [][]string{
			{"spec.replicaSpecs[2] has no mxReplicaType: it is a WORKER, Kubeflow's v1alpha1 operator's default"},
			{"ended the job when WORKER 0 exited", "SCHEDULER"},
			{"spec.schedulerName: set schedulerName: volcano in every replica group's pod template"},
		},
	}, {
		name: "kubeflow.org/v1: keys in any case, the mxjob-port, unset restartPolicy is Never",
		manifest: `
apiVersion: kubeflow.org/v1
kind: MXJob
metadata: {name: kf}
spec:
  mxReplicaSpecs:
    worker: {replicas: 2, restartPolicy: OnFailure, template: ` + mxTmpl + `}
    SCHEDULER: {template: {spec: {containers: [{name: mxnet, image: x, ports: [{name: mxjob-port, containerPort: 9990}]}]}}}
    Server: {replicas: 0, template: ` + mxTmpl + `}`,
		from:   "kubeflow.org/v1 MXJob",
		groups: []group{{"SCHEDULER", 1, 9990, "Never"}, {"WORKER", 2, 9091, "OnFailure"}},
		warnings: [][]string{
			{"spec.mxReplicaSpecs.SCHEDULER and spec.mxReplicaSpecs.Server: no restartPolicy, so Never"},
			{"spec.mxReplicaSpecs.Server has replicas: 0: left out, as today's MXJob runs at least one replica per group"},
		},
	}, {
		name: "kubeflow.org/v1beta1, with the run policy at the top of the spec",
		manifest: `
apiVersion: kubeflow.org/v1beta1
kind: MXJob
metadata: {name: kf}
spec:
  cleanPodPolicy: None
  backoffLimit: 1
  mxReplicaSpecs:
    Scheduler: {restartPolicy: ExitCode, template: ` + mxTmpl + `}`,
		from:   "kubeflow.org/v1beta1 MXJob",
		groups: []group{{"SCHEDULER", 1, 9091, "ExitCode"}},
	}, {
		name: "mlkube.io/v1beta1 MXJob that is not quite today's: mxPort, restartPolicy in a template",
		manifest: `
apiVersion: mlkube.io/v1beta1
kind: MXJob
metadata: {name: mx}
spec:
  replicaSpecs:
  - {mxReplicaType: SCHEDULER, mxPort: 9000, template: {spec: {containers: [{name: mxnet, image: x}], restartPolicy: Never}}}`,
		from:     "mlkube.io/v1beta1 MXJob (not in today's form)",
		groups:   []group{{"SCHEDULER", 1, 9000, "Never"}},
		warnings: [][]string{{"converted mlkube.io/v1beta1 MXJob (not in today's form) to today's form"}},
	}})
}

func TestMXJobCurrentPassesThroughUnchanged(t *testing.T) {
	res := mustConvert(t, `
apiVersion: mlkube.io/v1beta1
kind: MXJob
metadata: {name: mx}
spec:
  replicaSpecs:
  - {mxReplicaType: SCHEDULER, template: `+mxTmpl+`}
  - {mxReplicaType: WORKER, replicas: 2, port: 9999, restartPolicy: Never, template: `+mxTmpl+`}
  runPolicy: {backoffLimit: 0}`)
	if res.From != "" || len(res.Warnings) != 0 {
		t.Fatalf("From %q, warnings %q; want a pass-through", res.From, res.Warnings)
	}
	got := groupsOf(t, res.Job)
	want := []group{{"SCHEDULER", 0, 0, ""}, {"WORKER", 2, 9999, "Never"}} // nothing filled in
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("groups = %v, want %v", got, want)
	}
}

// What the apiserver would refuse in a converted MXJob is warned of, in its words; nothing is
// renamed, as the old MXJob operators required a container named mxnet too.
func TestMXJobWhatValidationWouldRefuseIsWarned(t *testing.T) {
	res := mustConvert(t, `
apiVersion: fioravanzo.org/v1alpha1
kind: MXJob
metadata: {name: Mx_Job}
spec:
  terminationPolicy: {chief: {replicaName: WORKER, replicaIndex: 1}}
  replicaSpecs:
  - {mxReplicaType: SCHEDULER, replicas: 2, template: {spec: {containers: [{name: mxnet-scheduler, image: x}]}}}
  - {mxReplicaType: SERVER, template: `+mxTmpl+`}
  - {mxReplicaType: SERVER, template: `+mxTmpl+`}`)
	assertRefusals(t, res,
		[]string{"metadata.name: a lowercase RFC 1123 subdomain", `(got "Mx_Job")`},
		[]string{"spec.replicaSpecs[0]: the SCHEDULER group has exactly one replica: set replicas: 1"},
		[]string{"spec.replicaSpecs[0].template.spec.containers: needs a container named 'mxnet'"},
		[]string{"spec.replicaSpecs[2]: Duplicate value", `"mxReplicaType":"SERVER"`},
	)
	if !hasWarning(res, "spec.terminationPolicy.chief names WORKER 1", "the SCHEDULER decides") {
		t.Errorf("no warning about terminationPolicy; warnings:\n%s", strings.Join(res.Warnings, "\n"))
	}
	if c := mx(res).Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Name; c != "mxnet-scheduler" {
		t.Errorf("container renamed to %q", c)
	}
	noScheduler := mustConvert(t, `
apiVersion: kubeflow.org/v1alpha1
kind: MXJob
metadata: {name: local}
spec:
  jobMode: local
  replicaSpecs:
  - {mxReplicaType: WORKER, template: `+mxTmpl+`}`)
	assertRefusals(t, noScheduler, []string{"spec: replicaSpecs needs a SCHEDULER group"})
	if !hasWarning(noScheduler, "dropped spec.jobMode: local", "without a scheduler") {
		t.Errorf("no warning about jobMode; warnings:\n%s", strings.Join(noScheduler.Warnings, "\n"))
	}
}

func TestMXJobErrorsNameTheField(t *testing.T) {
	const fork = "apiVersion: fioravanzo.org/v1alpha1\nkind: MXJob\nmetadata: {name: a}\n"
	const kf1 = "apiVersion: kubeflow.org/v1alpha1\nkind: MXJob\nmetadata: {name: a}\n"
	const kf = "apiVersion: kubeflow.org/v1\nkind: MXJob\nmetadata: {name: a}\n"
	const current = "apiVersion: mlkube.io/v1beta1\nkind: MXJob\nmetadata: {name: a}\n"
	for _, tc := range []struct{ manifest, want string }{
		{fork + "spec:\n  replicaSpecs:\n  - {mxReplicaType: SERVER}",
			`spec.replicaSpecs[0].template is missing`},
		{fork + "spec:\n  replicaSpecs:\n  - {mxPort: 0, template: " + mxTmpl + "}",
			`spec.replicaSpecs[0].mxPort: should be greater than or equal to 1 (got 0)`},
		{kf1 + "spec:\n  replicaSpecs:\n  - {PsRootPort: nine, template: " + mxTmpl + "}",
			`spec.replicaSpecs[0].PsRootPort: "nine" is not a whole number`},
		{kf1 + "spec:\n  replicaSpecs:\n  - {PsRootPort: 9000, psRootPort: 9001, template: " + mxTmpl + "}",
			`spec.replicaSpecs[0]: both PsRootPort and psRootPort are set; keep one`},
		{kf1 + "spec:\n  jobMode: cluster\n  replicaSpecs:\n  - {template: " + mxTmpl + "}",
			`spec.jobMode: "cluster" is not one of dist, local`},
		{kf1 + "spec:\n  cleanupPodPolicy: [All]\n  replicaSpecs:\n  - {template: " + mxTmpl + "}",
			`spec.cleanupPodPolicy: is a list, not a string`},
		{kf1 + "spec:\n  terminationPolicy: {chief: {replicaName: SCHEDULER, replicaIndex: zero}}\n  replicaSpecs:\n  - {template: " + mxTmpl + "}",
			`spec.terminationPolicy.chief.replicaIndex: "zero" is not a whole number`},
		{kf1 + "spec:\n  replicaSpecs:\n  - {replicas: 0, template: " + mxTmpl + "}", `spec.replicaSpecs: every group has replicas: 0`},
		{kf1 + "spec:\n  mxReplicaSpecs: {Scheduler: {template: " + mxTmpl + "}}", `set apiVersion: kubeflow.org/v1`},
		{kf1 + "spec: {replicaSpecs: []}", `spec.replicaSpecs: is empty`},
		{current + "spec:\n  replicaSpecs:\n  - {port: 9000, template: " + mxTmpl + "}",
			`spec.replicaSpecs[0].mxReplicaType is missing: it is one of SCHEDULER, SERVER, WORKER`},
		{kf + "spec:\n  mxReplicaSpecs:\n    Tuner: {template: " + mxTmpl + "}",
			`spec.mxReplicaSpecs.Tuner: Tuner is a replica of jobMode MXTune`},
		{kf + "spec:\n  mxReplicaSpecs:\n    Boss: {template: " + mxTmpl + "}",
			`spec.mxReplicaSpecs.Boss: "Boss" is not one of Scheduler, Server, Worker`},
		{kf + "spec:\n  mxReplicaSpecs:\n    Worker: {template: " + mxTmpl + "}\n    worker: {template: " + mxTmpl + "}",
			`spec.mxReplicaSpecs: Worker and worker name the same replica type`},
		{kf + "spec:\n  jobMode: MXTune\n  mxReplicaSpecs:\n    Worker: {template: " + mxTmpl + "}",
			`spec.jobMode: MXTune is TVM auto-tuning`},
		{kf + "spec:\n  mxReplicaSpecs:\n    Scheduler: {replicas: 1}", `spec.mxReplicaSpecs.Scheduler.template is missing`},
		{kf + "spec:\n  replicaSpecs: [{template: " + mxTmpl + "}]", `spec.mxReplicaSpecs is missing; spec.replicaSpecs is the list form`},
		{kf + "spec:\n  runPolicy: {backoffLimit: 1.5}\n  mxReplicaSpecs: {Scheduler: {template: " + mxTmpl + "}}", `spec.runPolicy.backoffLimit: 1.5 is not a whole number`},
		{kf + "spec:\n  mxReplicaSpecs: {Scheduler: {template: {spec: {containers: [{name: mxnet, image: [x]}]}}}}",
			`spec.mxReplicaSpecs.Scheduler.template.spec.containers.image: is an array`},
	} {
		_, err := Convert([]byte(tc.manifest))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Convert of\n%s\nerror: %v\nwant one holding: %s", tc.manifest, err, tc.want)
		}
	}
}
