package convert

import (
	"strings"
	"testing"
)

const jaxTmpl = "{spec: {containers: [{name: jax, image: x}]}}"

func TestJAXJobFormsAndDefaults(t *testing.T) {
	checkForms(t, []formCase{{
		name: "kubeflow.org/v1: the Worker key in any case, the jaxjob-port, unset restartPolicy is Never, Kubeflow's",
		manifest: `
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: jx}
spec:
  jaxReplicaSpecs:
    WORKER: {replicas: 4, template: {spec: {containers: [{name: jax, image: x, ports: [{name: jaxjob-port, containerPort: 1234}]}]}}}`,
		from:   "kubeflow.org/v1 JAXJob",
		groups: []group{{"WORKER", 4, 1234, "Never"}},
		warnings: [][]string{
			{"spec.jaxReplicaSpecs.WORKER: no restartPolicy, so Never, Kubeflow's default", "any failure fails the job"},
		},
	}, {
		name: "kubeflow.org/v1, restartPolicy set, no port: 6666, Kubeflow's and today's default",
		manifest: `
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: jx}
spec:
  jaxReplicaSpecs:
    Worker: {restartPolicy: ExitCode, template: ` + jaxTmpl + `}`,
		from:   "kubeflow.org/v1 JAXJob",
		groups: []group{{"WORKER", 1, 6666, "ExitCode"}},
	}, {
		name: "mlkube.io/v1beta1 JAXJob that is not quite today's: restartPolicy in a template",
		manifest: `
apiVersion: mlkube.io/v1beta1
kind: JAXJob
metadata: {name: jx}
spec:
  replicaSpecs:
  - {jaxReplicaType: WORKER, replicas: 2, template: {spec: {containers: [{name: jax, image: x}], restartPolicy: OnFailure}}}`,
		from:   "mlkube.io/v1beta1 JAXJob (not in today's form)",
		groups: []group{{"WORKER", 2, 6666, "OnFailure"}},
		warnings: [][]string{
			{"converted mlkube.io/v1beta1 JAXJob (not in today's form) to today's form"},
			{"spec.replicaSpecs[0]: moved restartPolicy: OnFailure from the pod template"},
		},
	}})
}

func TestJAXJobErrorsNameTheField(t *testing.T) {
	const kf = "apiVersion: kubeflow.org/v1\nkind: JAXJob\nmetadata: {name: a}\n"
	const current = "apiVersion: mlkube.io/v1beta1\nkind: JAXJob\nmetadata: {name: a}\n"
	for _, tc := range []struct{ manifest, want string }{
		{kf + "spec:\n  jaxReplicaSpecs:\n    Master: {template: " + jaxTmpl + "}", `spec.jaxReplicaSpecs.Master: "Master" is not one of Worker`},
		{kf + "spec:\n  jaxReplicaSpecs:\n    Worker: {template: " + jaxTmpl + "}\n    worker: {template: " + jaxTmpl + "}",
			`spec.jaxReplicaSpecs: Worker and worker name the same replica type`},
		{kf + "spec:\n  jaxReplicaSpecs:\n    Worker: {replicas: 2}", `spec.jaxReplicaSpecs.Worker.template is missing`},
		{kf + "spec:\n  jaxReplicaSpecs:\n    Worker: {replicas: 0, template: " + jaxTmpl + "}", `spec.jaxReplicaSpecs: has no replica group with a replica to run`},
		{kf + "spec:\n  replicaSpecs: [{template: " + jaxTmpl + "}]",
			`spec.jaxReplicaSpecs is missing; spec.replicaSpecs is the list form of mlkube.io/v1beta1 JAXJob: set apiVersion: mlkube.io/v1beta1`},
		{current + "spec:\n  replicaSpecs:\n  - {port: 1, template: " + jaxTmpl + "}",
			`spec.replicaSpecs[0].jaxReplicaType is missing: it is one of WORKER`},
		{current + "spec:\n  jaxReplicaSpecs: {Worker: {template: " + jaxTmpl + "}}",
			`spec.replicaSpecs is missing; spec.jaxReplicaSpecs is the form of kubeflow.org/v1 JAXJob: set apiVersion: kubeflow.org/v1 and kind: JAXJob`},
	} {
		_, err := Convert([]byte(tc.manifest))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Convert of\n%s\nerror: %v\nwant one holding: %s", tc.manifest, err, tc.want)
		}
	}
}

// A Kubeflow JAXJob whose container is not named jax converts, and the conversion says, in the
// apiserver's words, what today's JAXJob needs.
func TestJAXJobWithoutJaxContainerIsWarned(t *testing.T) {
	res := mustConvert(t, `
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: jx}
spec:
  jaxReplicaSpecs:
    Worker: {replicas: 2, restartPolicy: OnFailure, template: {spec: {containers: [{name: trainer, image: x}]}}}`)
	assertRefusals(t, res, []string{"spec.replicaSpecs[0].template.spec.containers: needs a container named 'jax'"})
}
