package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The logs of a finished job's pods, which cleanPodPolicy Running keeps: all replicas
// interleaved by time, one replica, the previous run; following a job that has ended prints
// everything and returns.
func TestLogsOfAFinishedJob(t *testing.T) {
	ns := envtest(t)
	startOperator(t, ns)
	fake := useFakeLogs(t, map[string]time.Time{"done-master-0": time.Unix(1000, 0), "done-worker-0": time.Unix(1000, 500), "done-worker-1": time.Unix(1000, 1000)})
	spec := func(typ v1beta1.TfReplicaType, n int32) v1beta1.TfReplicaSpec {
		return v1beta1.TfReplicaSpec{TfReplicaType: typ, Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}},
		}}}
	}
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
		spec(v1beta1.TfReplicaMaster, 1), spec(v1beta1.TfReplicaWorker, 2),
	}}}
	must(t, k8s.Create(context.Background(), job))
	eventually(t, "pods", func() error {
		var list corev1.PodList
		must(t, k8s.List(context.Background(), &list))
		n := 0
		for _, p := range list.Items {
			if p.Namespace == ns {
				n++
			}
		}
		if n != 3 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	for _, p := range []string{"done-worker-0", "done-worker-1", "done-master-0"} {
		setPod(t, ns, p, podRunning)
		setPod(t, ns, p, podExited(0))
	}
	eventually(t, "job done", func() error {
		if j := getJob(t, ns, "done"); j.Status.Phase != v1beta1.JobPhaseDone {
			return fmt.Errorf("phase %s", j.Status.Phase)
		}
		return nil
	})

	logs := func(o LogsOptions) (string, string, error) {
		o.Job = "done"
		o.Namespace = ns
		var out, status syncBuffer
		err := Logs(context.Background(), o, &out, &status)
		return out.String(), status.String(), err
	}
	out, _, err := logs(LogsOptions{})
	must(t, err)
	want := `master-0 | done-master-0 says hello
worker-0 | done-worker-0 says hello
worker-1 | done-worker-1 says hello
master-0 | done-master-0 says bye
worker-0 | done-worker-0 says bye
worker-1 | done-worker-1 says bye
`
	if out != want {
		t.Errorf("all replicas:\n%s\nwant:\n%s", out, want)
	}

	out, _, err = logs(LogsOptions{Replica: "worker-1", Previous: true})
	must(t, err)
	if want := "worker-1 | done-worker-1 says hello (previous run)\nworker-1 | done-worker-1 says bye (previous run)\n"; out != want {
		t.Errorf("--replica worker-1 --previous:\n%s\nwant:\n%s", out, want)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		out, _, err = logs(LogsOptions{Follow: true})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("-f on a job that has ended did not return")
	}
	must(t, err)
	for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
		if strings.Count(out, line+"\n") != 1 {
			t.Errorf("-f printed %q %d times, want once:\n%s", line, strings.Count(out, line), out)
		}
	}
	t.Logf("opened: %v", fake.opened)

	if _, _, err := logs(LogsOptions{Replica: "worker-7"}); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "tfjob/done has no replica worker-7; it has master-0, worker-0, worker-1") {
		t.Errorf("an unknown replica: exit %d, %v", ExitCode(err), err)
	}
	if _, _, err := logs(LogsOptions{Follow: true, Previous: true}); ExitCode(err) != ExitUsage {
		t.Errorf("-f --previous: exit %d, %v", ExitCode(err), err)
	}
	var status syncBuffer
	err = Logs(context.Background(), LogsOptions{Job: "nothere", Namespace: ns}, &syncBuffer{}, &status)
	var refs []string
	for _, k := range v1beta1.Kinds {
		refs = append(refs, k.Ref("nothere"))
	}
	if err == nil || err.Error() != "no "+strings.Join(refs, " or ")+" in namespace "+ns+" (context envtest)" {
		t.Errorf("a job that does not exist: %v", err)
	}
}

func TestConvertCommand(t *testing.T) {
	var out, status syncBuffer
	must(t, Convert("../../../samples/legacy/tfjob-2017.yaml", nil, &out, &status))
	if !strings.HasPrefix(out.String(), "apiVersion: mlkube.io/v1beta1\nkind: TfJob\n") || !strings.Contains(out.String(), "tfReplicaType: MASTER") {
		t.Errorf("converted manifest:\n%s", out.String())
	}
	if !strings.HasPrefix(status.String(), "warning: converted from mlkube.io/v1beta1 TfJob (2017, snake_case)") {
		t.Errorf("warnings:\n%s", status.String())
	}

	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"two.yaml", fmt.Sprintf(smallJob, "1ms") + "---\n" + fmt.Sprintf(smallJob, "1ms"), "holds 2 documents; give one job per file"},
		{"deployment.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n", "this is a Deployment of apps/v1, not a TfJob"},
		{"broken.yaml", "a: [b\n", "is not YAML or JSON"},
	} {
		err := Convert(writeJob(t, dir, tc.name, tc.yaml), nil, &syncBuffer{}, &syncBuffer{})
		if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: exit %d, %v", tc.name, ExitCode(err), err)
		}
	}
	if err := Convert("-", strings.NewReader(fmt.Sprintf(smallJob, "1ms")), &out, &status); err != nil {
		t.Errorf("from stdin: %v", err)
	}
}
