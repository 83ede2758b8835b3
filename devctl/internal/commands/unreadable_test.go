package commands

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests play the operator (no operator runs: it is not theirs to say what it does with
// a job it cannot read): they create the replica pods, owned and labelled as it does, and write
// the statuses.

// manifest is a job of kind k named name as a file for devctl run.
func manifest(t *testing.T, k *v1beta1.Kind, name string) string {
	t.Helper()
	u := jobtest.Unstructured(t, jobtest.NewJob(k, "", name))
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	b, err := yaml.Marshal(u.Object)
	must(t, err)
	return string(b)
}

// waitJob waits until the job of kind k named name exists, and returns it.
func waitJob(t *testing.T, k *v1beta1.Kind, ns, name string) v1beta1.Job {
	t.Helper()
	job := k.New()
	eventually(t, k.Ref(name), func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)
	})
	return job
}

// ownPods creates the job's replica pods as the operator does: labelled, and controlled by the
// job. It returns their names.
func ownPods(t *testing.T, job v1beta1.Job) []string {
	t.Helper()
	kind := v1beta1.KindOf(job)
	var names []string
	for _, g := range job.Groups() {
		typ := strings.ToLower(g.Type)
		for i := range g.Replicas {
			p := replicaPod(kind, job.GetNamespace(), fmt.Sprintf("%s-%s-%d", job.GetName(), typ, i), job.GetName(), typ, i)
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, v1beta1.GroupVersion.WithKind(kind.Name))}
			must(t, k8s.Create(context.Background(), p))
			names = append(names, p.Name)
		}
	}
	return names
}

// replicaPod is a pod labelled as replica typ-index of the job of kind named job, owned by no one.
func replicaPod(kind *v1beta1.Kind, ns, name, job, typ string, index int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			v1beta1.LabelJobName: job, v1beta1.LabelJobKind: kind.Label(),
			v1beta1.LabelReplicaType: typ, v1beta1.LabelReplicaIndex: fmt.Sprint(index),
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kind.Container, Image: "mlkube/trainer:test"}}},
	}
}

// exited plays the kubelet: each pod ran and exited with code.
func exited(t *testing.T, ns string, code int32, pods ...string) {
	t.Helper()
	for _, p := range pods {
		setPod(t, ns, p, podRunning)
		setPod(t, ns, p, podExited(code))
	}
}

// succeed plays the operator: the job succeeded.
func succeed(t *testing.T, job v1beta1.Job) {
	t.Helper()
	eventually(t, "status of "+job.GetName(), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		st := job.JobStatus()
		st.State, st.Phase = v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone
		return k8s.Status().Update(context.Background(), job)
	})
}

// runToSuccess runs the job of file (of kind k, named name) with devctl run, playing the
// operator and the kubelet until it succeeds, and returns what run printed.
func runToSuccess(t *testing.T, k *v1beta1.Kind, ns, file, name string, meanwhile func(job v1beta1.Job)) (out, status string) {
	t.Helper()
	var o, s syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), RunOptions{File: file, Namespace: ns, Timeout: time.Minute}, &o, &s)
	}()
	job := waitJob(t, k, ns, name)
	exited(t, ns, 0, ownPods(t, job)...)
	if meanwhile != nil {
		meanwhile(job)
	}
	succeed(t, job)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("devctl run %s: %v\nstderr:\n%s", k.Ref(name), err, s.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("devctl run %s did not return; stderr so far:\n%s", k.Ref(name), s.String())
	}
	return o.String(), s.String()
}

// An unreadable job of every kind (a number its int32 cannot hold, stored before the CRD
// bounded the field) beside readable ones: devctl status lists it as unreadable with the field;
// logs, suspend, resume and a run of a file naming it refuse it, saying why and what to do;
// run --replace replaces it; run and logs of every other job work.
func TestUnreadableJobs(t *testing.T) {
	ns := envtest(t)
	collectGarbage(t, ns)
	useFakeLogs(t, nil)
	ctx := context.Background()
	running := v1beta1.JobStatus{State: v1beta1.JobStateRunning, Phase: v1beta1.JobPhaseRunning}
	var bad []*unstructured.Unstructured
	for _, k := range v1beta1.Kinds {
		must(t, k8s.Create(ctx, jobtest.NewJob(k, ns, "good-"+k.Label())))
		bad = append(bad, jobtest.UnreadableJob(t, k, ns, "bad-"+k.Label(), running))
	}
	jobtest.StoreUnreadable(t, jobtest.Config, []string{jobtest.UnreadableTTLField}, bad...)

	t.Run("status", func(t *testing.T) {
		var b bytes.Buffer
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0) // as Status writes them
		served := map[*v1beta1.Kind]bool{}
		for _, k := range v1beta1.Kinds {
			served[k] = true
		}
		writeJobs(ctx, w, &cluster.Clients{Client: k8s}, served, client.InNamespace(ns))
		must(t, w.Flush())
		got := regexp.MustCompile(` {2,}`).ReplaceAllString(b.String(), "  ")
		want := []string{}
		for _, k := range v1beta1.Kinds {
			want = append(want,
				fmt.Sprintf("%ss  1 New, 1 Unreadable\n", k.Name),
				fmt.Sprintf("  %s in namespace %s is unreadable: %s\n", k.Ref("bad-"+k.Label()), ns, jobtest.UnreadableTTLWhy))
		}
		want = append(want, "Unreadable  "+v1beta1.UnreadableHint+"\n")
		if g := strings.Join(want, ""); got != g {
			t.Errorf("devctl status's jobs:\n%s\nwant:\n%s", got, g)
		}
	})

	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			name := "bad-" + k.Label()
			cannot := func(doing string) string {
				return fmt.Sprintf("cannot %s %s in namespace %s: it is unreadable (%s); %s", doing, k.Ref(name), ns, jobtest.UnreadableTTLWhy, v1beta1.UnreadableHint)
			}
			refused := func(what string, err error, code int, want string) {
				t.Helper()
				if err == nil || ExitCode(err) != code || err.Error() != want {
					t.Errorf("%s: exit %d, %v\nwant exit %d, %s", what, ExitCode(err), err, code, want)
				}
			}
			for _, f := range []bool{false, true} {
				err := Logs(ctx, LogsOptions{Job: name, Namespace: ns, Follow: f}, &syncBuffer{}, &syncBuffer{})
				refused(fmt.Sprintf("devctl logs -f=%v", f), err, ExitFailed, cannot("show the logs of"))
			}
			for _, s := range []bool{true, false} {
				doing := map[bool]string{true: "suspend", false: "resume"}[s]
				err := Suspend(ctx, SuspendOptions{Job: name, Namespace: ns, Suspend: s, Wait: time.Second}, &bytes.Buffer{})
				refused("devctl "+doing, err, ExitFailed, cannot(doing))
			}
			stored := waitJob(t, k, ns, name)
			file := writeJob(t, t.TempDir(), name+".yaml", manifest(t, k, name))
			err := Run(ctx, RunOptions{File: file, Namespace: ns, Timeout: 10 * time.Second}, &syncBuffer{}, &syncBuffer{})
			refused("devctl run of a file naming it", err, ExitUsage, fmt.Sprintf("%s already exists in namespace %s and is unreadable (%s); %s. --replace deletes it, with its pods, and creates the one of %s",
				k.Ref(name), ns, jobtest.UnreadableTTLWhy, v1beta1.UnreadableHint, file))
			if now := waitJob(t, k, ns, name); now.GetUID() != stored.GetUID() || now.Unreadable() == "" {
				t.Errorf("devctl run changed the unreadable job")
			}

			// Beside it, a new job runs to its end and the readable one's logs read.
			fresh := "fresh-" + k.Label()
			out, _ := runToSuccess(t, k, ns, writeJob(t, t.TempDir(), fresh+".yaml", manifest(t, k, fresh)), fresh, nil)
			if want := fmt.Sprintf("%s-%s-0 says bye", fresh, strings.ToLower(k.Types[0])); !strings.Contains(out, want) {
				t.Errorf("devctl run of %s beside an unreadable job: no %q in its logs:\n%s", k.Ref(fresh), want, out)
			}
			good := waitJob(t, k, ns, "good-"+k.Label())
			pods := ownPods(t, good)
			exited(t, ns, 0, pods...)
			var logs syncBuffer
			must(t, Logs(ctx, LogsOptions{Job: good.GetName(), Namespace: ns}, &logs, &syncBuffer{}))
			for _, p := range pods {
				if !strings.Contains(logs.String(), p+" says hello") {
					t.Errorf("devctl logs %s beside an unreadable job: no log of %s:\n%s", good.GetName(), p, logs.String())
				}
			}

			// --replace deletes the unreadable job, saying so, and runs the file's.
			var status syncBuffer
			err = Run(ctx, RunOptions{File: file, Namespace: ns, Replace: true, Timeout: 3 * time.Second}, &syncBuffer{}, &status)
			if ExitCode(err) != ExitTimeout {
				t.Errorf("devctl run --replace: exit %d, %v\n%s", ExitCode(err), err, status.String())
			}
			if want := fmt.Sprintf("deleting %s (--replace; it is unreadable: %s)", k.Ref(name), jobtest.UnreadableTTLWhy); !strings.Contains(status.String(), want) {
				t.Errorf("no %q in:\n%s", want, status.String())
			}
			if now := waitJob(t, k, ns, name); now.GetUID() == stored.GetUID() || now.Unreadable() != "" {
				t.Errorf("--replace left the unreadable job (%s)", now.Unreadable())
			}
		})
	}
}

// devctl status checks the CRD of every kind of the table, and lists the jobs of those served.
func TestCRDHealthCoversEveryKind(t *testing.T) {
	envtest(t)
	scheme := runtime.NewScheme()
	must(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(jobtest.Config, client.Options{Scheme: scheme})
	must(t, err)
	line, served := crdHealth(context.Background(), &cluster.Clients{Client: c})
	for _, k := range v1beta1.Kinds {
		if !served[k] || !strings.Contains(line, k.Plural) {
			t.Errorf("%s: served %v, line %q", k.CRD(), served[k], line)
		}
	}
	if !strings.HasPrefix(line, "established, serving mlkube.io/v1beta1: ") {
		t.Errorf("line %q", line)
	}
}
