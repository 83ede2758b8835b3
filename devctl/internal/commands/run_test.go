package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

const smallJob = `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: small
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:
        containers:
        - name: tensorflow
          image: mlkube/trainer:test
          args: [--step-delay=%s]
  - tfReplicaType: WORKER
    replicas: 2
    template:
      spec:
        containers:
        - name: tensorflow
          image: mlkube/trainer:test
`

// The apiserver's own refusal of an invalid TfJob, one cause per line, field path first.
func TestInvalidCausesFromTheAPIServer(t *testing.T) {
	ns := envtest(t)
	group := func(typ v1beta1.TfReplicaType, n int32, container string) v1beta1.TfReplicaSpec {
		return v1beta1.TfReplicaSpec{TfReplicaType: typ, Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: container, Image: "mlkube/trainer:test"}},
		}}}
	}
	for _, tc := range []struct {
		job  *v1beta1.TfJob
		want []string
	}{
		{
			&v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
				group(v1beta1.TfReplicaMaster, 1, "tensorflow"), group(v1beta1.TfReplicaWorker, -1, "tensorflow"), group("BOSS", 1, "tensorflow"),
			}}},
			[]string{
				"spec.replicaSpecs[1].replicas: should be greater than or equal to 1 (got -1)",
				`spec.replicaSpecs[2].tfReplicaType: Unsupported value: "BOSS": supported values: "MASTER", "CHIEF", "WORKER", "PS", "EVALUATOR"`,
				"some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
			},
		},
		{
			&v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-chiefs"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
				group(v1beta1.TfReplicaChief, 2, "trainer"),
			}}},
			[]string{
				"spec.replicaSpecs[0]: a MASTER or CHIEF group has exactly one replica: set replicas: 1 (use WORKER for more)",
				"spec.replicaSpecs[0].template.spec.containers: needs a container named 'tensorflow': the operator gives it TF_CONFIG, and its exit code decides the replica's outcome",
			},
		},
		{
			&v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mnist-v2-" + strings.Repeat("x", 40)}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
				group(v1beta1.TfReplicaPS, 1, "tensorflow"),
			}}},
			[]string{
				"metadata.name must be at most 48 characters: each replica's hostname is <name>-<type>-<index>, and hostnames stop at 63",
				"spec: replicaSpecs needs a MASTER, CHIEF or WORKER group: one of them decides when the job is done",
			},
		},
	} {
		err := k8s.Create(context.Background(), tc.job, client.DryRunAll)
		got := invalidCauses(err)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: causes\n%s\nwant\n%s\n(error: %v)", tc.job.Name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"), err)
		}
	}
	// The admission policy's refusals, one line each, without the policy's preamble.
	gpu := group(v1beta1.TfReplicaWorker, 1, "tensorflow")
	gpu.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("500m")}
	gpu.Template.Labels = map[string]string{"model name": "gemma"}
	err := k8s.Create(context.Background(), &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy"},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{gpu}}}, client.DryRunAll)
	got := invalidCauses(err)
	if len(got) != 2 || !strings.HasPrefix(got[0], `spec.replicaSpecs[WORKER].template.metadata.labels: "model name" is not a label key`) ||
		!strings.HasPrefix(got[1], "spec.replicaSpecs[WORKER].template.spec.containers[tensorflow].resources.limits[nvidia.com/gpu]: 500m is not a whole number") {
		t.Errorf("the policy's refusal: %q (error: %v)", got, err)
	}
	if lines, ok := policyRefusals("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: spec.a: x; y; spec.b: z; metadata.labels[q]: w"); !ok ||
		strings.Join(lines, "\n") != "spec.a: x; y\nspec.b: z\nmetadata.labels[q]: w" {
		t.Errorf("policyRefusals: %q", lines)
	}
	if invalidCauses(fmt.Errorf("connection refused")) != nil {
		t.Error("an error that is no refusal has causes")
	}
}

func TestCauseMessage(t *testing.T) {
	for _, tc := range []struct{ field, msg, want string }{
		{"spec.replicaSpecs[1].replicas", "Invalid value: 0: spec.replicaSpecs[1].replicas in body should be greater than or equal to 1", "should be greater than or equal to 1 (got 0)"},
		{"spec.tensorboard.logDir", `Invalid value: "": spec.tensorboard.logDir in body should be at least 1 chars long`, "should be at least 1 chars long"},
		{"spec", `Invalid value: "object": replicaSpecs needs a MASTER: one decides`, "replicaSpecs needs a MASTER: one decides"},
		{"metadata.name", `Invalid value: "a: b": a lowercase RFC 1123 subdomain`, `a lowercase RFC 1123 subdomain (got "a: b")`},
		{"spec.replicaSpecs", "Required value", "Required value"},
		{"x", "Invalid value: nonsense", "Invalid value: nonsense"},
	} {
		if got := causeMessage(tc.field, tc.msg); got != tc.want {
			t.Errorf("causeMessage(%q, %q) = %q, want %q", tc.field, tc.msg, got, tc.want)
		}
	}
}

// An invalid job is refused before anything is created, with exit code 2 and every cause.
func TestRunRefusesAnInvalidJob(t *testing.T) {
	ns := envtest(t)
	file := writeJob(t, t.TempDir(), "bad.yaml", strings.Replace(fmt.Sprintf(smallJob, "1ms"), "replicas: 2", "replicas: -1", 1))
	var out, status syncBuffer
	err := Run(context.Background(), RunOptions{File: file, Namespace: ns}, &out, &status)
	if ExitCode(err) != ExitUsage {
		t.Fatalf("exit %d (%v), want %d", ExitCode(err), err, ExitUsage)
	}
	for _, want := range []string{
		"tfjob/small in " + file + " is invalid; nothing was created:",
		"\n  spec.replicaSpecs[1].replicas: should be greater than or equal to 1 (got -1)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if getJob(t, ns, "small") != nil {
		t.Error("the invalid job was created")
	}
}

// A job is followed to its end: exit 0 when it succeeded, 1 with the Failed condition's message
// when it failed; --rm deletes it afterwards.
func TestRunFollowsTheJobToItsEnd(t *testing.T) {
	ns := envtest(t)
	startOperator(t, ns)
	useFakeLogs(t, map[string]time.Time{"small-master-0": time.Unix(1000, 0), "small-worker-0": time.Unix(1000, 500), "small-worker-1": time.Unix(1000, 1000)})
	file := writeJob(t, t.TempDir(), "small.yaml", fmt.Sprintf(smallJob, "1ms"))

	for _, tc := range []struct {
		name   string
		master int32
		rm     bool
		exit   int
		says   string
	}{
		{"succeeds", 0, true, 0, "tfjob/small Succeeded in "},
		{"fails", 3, false, ExitFailed, "pod small-master-0 exited with code 3 (Error; permanent: 1-127): the job failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No garbage collector: the pods of the last run stay when --rm deletes its job.
			must(t, k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns)))
			var out, status syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- Run(context.Background(), RunOptions{File: file, Namespace: ns, Rm: tc.rm, Replace: true, Timeout: time.Minute}, &out, &status)
			}()
			pods := []string{"small-master-0", "small-worker-0", "small-worker-1"}
			eventually(t, "pods of the new job", func() error {
				job := getJob(t, ns, "small")
				if job == nil || job.DeletionTimestamp != nil {
					return fmt.Errorf("no job yet")
				}
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
			setPod(t, ns, "small-master-0", podExited(tc.master))
			var err error
			select {
			case err = <-done:
			case <-time.After(45 * time.Second):
				t.Fatalf("Run did not return; status so far:\n%s", status.String())
			}
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), status.String())
			if ExitCode(err) != tc.exit {
				t.Fatalf("exit %d (%v), want %d", ExitCode(err), err, tc.exit)
			}
			all := status.String()
			if err != nil {
				all += err.Error()
			}
			// master-0 was Pending when first seen, unless the pods ran before the watch began.
			if !strings.Contains(all, "master-0  Pending -> Running\n") && !strings.Contains(all, "master-0  Running\n") {
				t.Error("master-0 never seen running")
			}
			for _, want := range []string{
				"created tfjob/small in namespace " + ns + " (context envtest)",
				"tfjob     all 3 replicas have started",
				tc.says,
			} {
				if !strings.Contains(all, want) {
					t.Errorf("no %q in the output", want)
				}
			}
			if want := "master-0 | small-master-0 says hello\nworker-0 | small-worker-0 says hello\nworker-1 | small-worker-1 says hello\nmaster-0 | small-master-0 says bye\n"; !strings.Contains(out.String(), want) {
				t.Errorf("logs not interleaved by time; want\n%s", want)
			}
			if job := getJob(t, ns, "small"); tc.rm != (job == nil || job.DeletionTimestamp != nil) {
				t.Errorf("--rm %v, but the job is %v", tc.rm, job)
			}
			if tc.rm && !strings.Contains(all, "deleted tfjob/small (--rm)") {
				t.Error("--rm did not say it deleted the job")
			}
		})
	}
}

// A job of the same name is an error without --replace; with it the old job and its pods are
// deleted and the new one created. --timeout stops following with exit 124, the job left as it is.
func TestRunReplaceAndTimeout(t *testing.T) {
	ns := envtest(t)
	collectGarbage(t, ns)
	file := writeJob(t, t.TempDir(), "small.yaml", fmt.Sprintf(smallJob, "1ms"))
	var out, status syncBuffer
	err := Run(context.Background(), RunOptions{File: file, Namespace: ns, Timeout: time.Second}, &out, &status)
	if ExitCode(err) != ExitTimeout || !strings.Contains(err.Error(), "stopped following after --timeout 1s; tfjob/small goes on: devctl logs small -f -n "+ns+" to follow again") {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	first := getJob(t, ns, "small")
	if first == nil {
		t.Fatal("no job after the timeout")
	}

	err = Run(context.Background(), RunOptions{File: file, Namespace: ns, Timeout: time.Second}, &out, &status)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "tfjob/small already exists in namespace "+ns+": --replace deletes it, with its pods, and creates it again") {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	if again := getJob(t, ns, "small"); again.UID != first.UID {
		t.Error("the job was replaced without --replace")
	}

	status = syncBuffer{}
	err = Run(context.Background(), RunOptions{File: file, Namespace: ns, Timeout: 5 * time.Second, Replace: true}, &out, &status)
	if ExitCode(err) != ExitTimeout {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	if second := getJob(t, ns, "small"); second == nil || second.UID == first.UID {
		t.Errorf("--replace left the old job")
	}
	for _, want := range []string{"deleting tfjob/small (--replace) and waiting until it and its pods are gone ...", "deleted tfjob/small and its pods", "created tfjob/small"} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("no %q in:\n%s", want, status.String())
		}
	}
}

// --watch submits the job again when the file changes, keeps the job when the change does not
// validate, and ends with exit 0 when interrupted.
func TestRunWatchSubmitsAgainOnChange(t *testing.T) {
	ns := envtest(t)
	collectGarbage(t, ns)
	dir := t.TempDir()
	file := writeJob(t, dir, "small.yaml", fmt.Sprintf(smallJob, "1ms"))
	var out, status syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{File: file, Namespace: ns, Watch: true, Debounce: 100 * time.Millisecond}, &out, &status)
	}()
	var first *v1beta1.TfJob
	eventually(t, "the first job", func() error {
		if first = getJob(t, ns, "small"); first == nil {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	args := func(j *v1beta1.TfJob) string {
		return strings.Join(j.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].Args, " ")
	}

	// An editor's save: a new file renamed over the old one.
	tmp := writeJob(t, dir, ".small.yaml.swp", fmt.Sprintf(smallJob, "2ms"))
	must(t, os.Rename(tmp, file))
	var second *v1beta1.TfJob
	eventually(t, "the job submitted again", func() error {
		if second = getJob(t, ns, "small"); second == nil || second.UID == first.UID || second.DeletionTimestamp != nil {
			return fmt.Errorf("not yet; status:\n%s", status.String())
		}
		return nil
	})
	if args(second) != "--step-delay=2ms" {
		t.Errorf("the new job runs %q, want the changed file's --step-delay=2ms", args(second))
	}

	writeJob(t, dir, "small.yaml", strings.Replace(fmt.Sprintf(smallJob, "3ms"), "MASTER", "BOSS", 1))
	eventually(t, "the invalid change refused", func() error {
		if !strings.Contains(status.String(), "kept tfjob/small as it is; waiting for "+file+" to change again") {
			return fmt.Errorf("status:\n%s", status.String())
		}
		return nil
	})
	if now := getJob(t, ns, "small"); now.UID != second.UID {
		t.Error("an invalid change replaced the job")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("--watch ended with %v, want nil (exit 0)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--watch did not end when interrupted")
	}
	for _, want := range []string{
		file + " changed: submitting it again",
		"deleting tfjob/small (--watch)",
		`spec.replicaSpecs[0].tfReplicaType: Unsupported value: "BOSS"`,
		"left tfjob/small running; devctl logs small -f -n " + ns + " to follow again",
	} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("no %q in:\n%s", want, status.String())
		}
	}
}

// Ctrl-C stops following and leaves the job running, exit 130.
func TestRunInterrupted(t *testing.T) {
	ns := envtest(t)
	file := writeJob(t, t.TempDir(), "small.yaml", fmt.Sprintf(smallJob, "1ms"))
	ctx, cancel := context.WithCancel(context.Background())
	var out, status syncBuffer
	done := make(chan error, 1)
	go func() { done <- Run(ctx, RunOptions{File: file, Namespace: ns}, &out, &status) }()
	eventually(t, "job created", func() error {
		if !strings.Contains(status.String(), "created tfjob/small") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	cancel()
	err := <-done
	if ExitCode(err) != ExitInterrupted || !strings.Contains(status.String(), "left tfjob/small running; devctl logs small -f -n "+ns+" to follow again") {
		t.Errorf("exit %d (%v); status:\n%s", ExitCode(err), err, status.String())
	}
	if getJob(t, ns, "small") == nil {
		t.Error("the job is gone after Ctrl-C")
	}
}

// useKubeconfig points KUBECONFIG at a cluster served from server.
func useKubeconfig(t *testing.T, server string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["kind-mlkube"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "kind-mlkube"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, clientcmd.WriteToFile(*cfg, path))
	t.Setenv("KUBECONFIG", path)
}

// No cluster, or a cluster without the CRD: errors that say what to do.
func TestRunWithoutACluster(t *testing.T) {
	file := writeJob(t, t.TempDir(), "small.yaml", fmt.Sprintf(smallJob, "1ms"))

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	useKubeconfig(t, down.URL)
	err := Run(context.Background(), RunOptions{File: file}, &syncBuffer{}, &syncBuffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "no cluster answers at context kind-mlkube (") || !strings.HasSuffix(err.Error(), "): run `make up` first") {
		t.Errorf("no cluster: %v", err)
	}

	// An apiserver that serves no mlkube.io.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/version" {
			json.NewEncoder(w).Encode(map[string]string{"major": "1", "minor": "34", "gitVersion": "v1.34.4"})
			return
		}
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
	}))
	defer bare.Close()
	useKubeconfig(t, bare.URL)
	err = Run(context.Background(), RunOptions{File: file}, &syncBuffer{}, &syncBuffer{})
	if err == nil || err.Error() != "TfJob CRD not installed in the cluster at context kind-mlkube: run devctl up" {
		t.Errorf("no CRD: %v", err)
	}

	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	err = Run(context.Background(), RunOptions{File: file}, &syncBuffer{}, &syncBuffer{})
	if err == nil || !strings.Contains(err.Error(), "no current kubeconfig context: run `make up` first") {
		t.Errorf("no kubeconfig: %v", err)
	}
}
