package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

const smallMXJob = `
apiVersion: mlkube.io/v1beta1
kind: MXJob
metadata:
  name: %s
spec:
  replicaSpecs:
  - mxReplicaType: SCHEDULER
    template:
      spec:
        containers:
        - name: mxnet
          image: mlkube/trainer:test
  - mxReplicaType: SERVER
    template:
      spec:
        containers:
        - name: mxnet
          image: mlkube/trainer:test
  - mxReplicaType: WORKER
    template:
      spec:
        containers:
        - name: mxnet
          image: mlkube/trainer:test
`

// An MXJob runs like a TfJob: created, followed by its MXNet roles, the job's lines as mxjob,
// exit 0 when the scheduler exits 0; devctl logs then finds it by its name.
func TestRunAnMXJob(t *testing.T) {
	ns := envtest(t)
	startOperator(t, ns)
	useFakeLogs(t, map[string]time.Time{"mx-scheduler-0": time.Unix(1000, 0), "mx-server-0": time.Unix(1000, 500), "mx-worker-0": time.Unix(1000, 1000)})
	file := writeJob(t, t.TempDir(), "mx.yaml", fmt.Sprintf(smallMXJob, "mx"))
	var out, status syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), RunOptions{File: file, Namespace: ns, Timeout: time.Minute}, &out, &status)
	}()
	pods := []string{"mx-scheduler-0", "mx-server-0", "mx-worker-0"}
	eventually(t, "the pods", func() error {
		var list corev1.PodList
		must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
		if len(list.Items) != 3 {
			return fmt.Errorf("%d pods", len(list.Items))
		}
		return nil
	})
	for _, p := range pods {
		setPod(t, ns, p, podRunning)
	}
	setPod(t, ns, "mx-worker-0", podExited(0))
	setPod(t, ns, "mx-scheduler-0", podExited(0))
	var err error
	select {
	case err = <-done:
	case <-time.After(45 * time.Second):
		t.Fatalf("Run did not return; status so far:\n%s", status.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), status.String())
	if err != nil {
		t.Fatalf("exit %d (%v), want 0", ExitCode(err), err)
	}
	for _, want := range []string{
		"created mxjob/mx in namespace " + ns + " (context envtest)",
		"mxjob        all 3 replicas have started",
		"scheduler-0  Running -> Succeeded (exit code 0)",
		"mxjob        Succeeded=True (SchedulerSucceeded): job succeeded: scheduler 0 exited 0",
		"mxjob/mx Succeeded in ",
	} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("no %q in the output", want)
		}
	}
	if want := "scheduler-0 | mx-scheduler-0 says hello\nserver-0    | mx-server-0 says hello\nworker-0    | mx-worker-0 says hello\n"; !strings.Contains(out.String(), want) {
		t.Errorf("logs not interleaved by time; want\n%s", want)
	}

	out = syncBuffer{}
	must(t, Logs(context.Background(), LogsOptions{Job: "mx", Namespace: ns, Replica: "scheduler-0"}, &out, &syncBuffer{}))
	if want := "scheduler-0 | mx-scheduler-0 says hello\nscheduler-0 | mx-scheduler-0 says bye\n"; out.String() != want {
		t.Errorf("devctl logs mx --replica scheduler-0:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A TfJob and an MXJob of the same name: devctl logs asks which, --kind says it; devctl run's
// hint to follow again names the kind.
func TestLogsOfTwoJobsOfOneName(t *testing.T) {
	ns := envtest(t)
	ctx := context.Background()
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "x"}}}}
	must(t, k8s.Create(ctx, &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "twin"}, Spec: v1beta1.TfJobSpec{
		ReplicaSpecs: []v1beta1.TfReplicaSpec{{TfReplicaType: v1beta1.TfReplicaWorker, Template: tmpl}},
	}}))
	file := writeJob(t, t.TempDir(), "twin.yaml", fmt.Sprintf(smallMXJob, "twin"))
	err := Run(ctx, RunOptions{File: file, Namespace: ns, Timeout: time.Second}, &syncBuffer{}, &syncBuffer{})
	if ExitCode(err) != ExitTimeout || !strings.Contains(err.Error(), "mxjob/twin goes on: devctl logs twin -f -n "+ns+" --kind mxjob to follow again") {
		t.Errorf("exit %d: %v", ExitCode(err), err)
	}

	logs := func(kind string) error {
		return Logs(ctx, LogsOptions{Job: "twin", Kind: kind, Namespace: ns}, &syncBuffer{}, &syncBuffer{})
	}
	if err := logs(""); ExitCode(err) != ExitUsage || err.Error() != "tfjob/twin and mxjob/twin exist in namespace "+ns+": say which with --kind tfjob or --kind mxjob" {
		t.Errorf("no --kind: exit %d, %v", ExitCode(err), err)
	}
	for kind, want := range map[string]string{"mxjob": "mxjob/twin has no pods", "TfJob": "tfjob/twin has no pods"} {
		if err := logs(kind); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("--kind %s: %v, want %q", kind, err, want)
		}
	}
	if err := logs("nosuchjob"); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--kind nosuchjob: it is one of "+strings.Join(v1beta1.Labels(), ", ")) {
		t.Errorf("--kind nosuchjob: exit %d, %v", ExitCode(err), err)
	}
	err = Logs(ctx, LogsOptions{Job: "nothere", Kind: "mxjob", Namespace: ns}, &syncBuffer{}, &syncBuffer{})
	if err == nil || err.Error() != "no mxjob/nothere in namespace "+ns+" (context envtest)" {
		t.Errorf("--kind mxjob of a job that does not exist: %v", err)
	}
}

func TestConvertAnMXJob(t *testing.T) {
	var out, status syncBuffer
	must(t, Convert("../../../samples/legacy/mxjob-fioravanzo.yaml", nil, &out, &status))
	if !strings.HasPrefix(out.String(), "apiVersion: mlkube.io/v1beta1\nkind: MXJob\n") || !strings.Contains(out.String(), "mxReplicaType: SCHEDULER") {
		t.Errorf("converted manifest:\n%s", out.String())
	}
	if !strings.HasPrefix(status.String(), "warning: converted from fioravanzo.org/v1alpha1 MXJob, an older API, to today's mlkube.io/v1beta1 MXJob") {
		t.Errorf("warnings:\n%s", status.String())
	}
}
