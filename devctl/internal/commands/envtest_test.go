package commands

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The tests of run and logs work on a real kube-apiserver and etcd (envtest), through a
// kubeconfig whose current context is "envtest", as devctl would on a kind cluster. There is no
// kubelet (tests write pod statuses), no garbage collector (tests finish foreground deletions)
// and no log to stream (fakeLogs serves them).

var (
	k8s        client.Client
	kubeconfig string // the envtest kubeconfig file, its current context "envtest"
)

func TestMain(m *testing.M) {
	jobtest.Main(m, func() {
		k8s = jobtest.Client
		if err := writeKubeconfig(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	})
}

func writeKubeconfig() error {
	dir, err := os.MkdirTemp("", "devctl-commands-test")
	if err != nil {
		return err
	}
	jobtest.AfterAll(func() { os.RemoveAll(dir) })
	kc, err := clientcmd.Load(jobtest.Env.KubeConfig)
	if err != nil {
		return err
	}
	for name := range kc.Contexts {
		kc.Contexts["envtest"] = kc.Contexts[name]
	}
	kc.CurrentContext = "envtest"
	kubeconfig = filepath.Join(dir, "kubeconfig")
	return clientcmd.WriteToFile(*kc, kubeconfig)
}

// envtest points KUBECONFIG at the envtest cluster and returns a namespace of the test's own.
func envtest(t *testing.T) string {
	t.Helper()
	ns := jobtest.Namespace(t)
	t.Setenv("KUBECONFIG", kubeconfig)
	return ns
}

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	jobtest.Eventually(t, what, cond)
}

func startOperator(t *testing.T, ns string) { t.Helper(); jobtest.StartOperator(t, ns) }

// collectGarbage plays the garbage collector for foreground deletions of jobs of every kind in
// ns: it deletes a deleted job's pods and then lets the job go, until the test ends. The job is
// patched, not updated: an unreadable one would be written back with an empty spec.
func collectGarbage(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			for _, k := range v1beta1.Kinds {
				list := k.NewList()
				if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
					continue
				}
				_ = apimeta.EachListItem(list, func(obj runtime.Object) error {
					j := obj.(client.Object)
					if j.GetDeletionTimestamp() == nil {
						return nil
					}
					_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{v1beta1.LabelJobName: j.GetName(), v1beta1.LabelJobKind: k.Label()})
					before := j.DeepCopyObject().(client.Object)
					j.SetFinalizers(slices.DeleteFunc(j.GetFinalizers(), func(f string) bool { return f == metav1.FinalizerDeleteDependents }))
					_ = k8s.Patch(ctx, j, client.MergeFrom(before))
					return nil
				})
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func getJob(t *testing.T, ns, name string) *v1beta1.TfJob {
	t.Helper()
	var job v1beta1.TfJob
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	must(t, err)
	return &job
}

// setPod plays the kubelet: it writes a pod's status.
func setPod(t *testing.T, ns, name string, mutate func(*corev1.Pod)) {
	t.Helper()
	for range 20 {
		var p corev1.Pod
		must(t, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p))
		mutate(&p)
		if len(p.Status.ContainerStatuses) > 0 {
			cs := &p.Status.ContainerStatuses[0]
			cs.Name, cs.Image, cs.ImageID, cs.ContainerID = p.Spec.Containers[0].Name, "mlkube/trainer:test", "docker://sha256:0", "containerd://"+p.Name
		}
		err := k8s.Status().Update(context.Background(), &p)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatalf("pod %s: too many conflicts", name)
}

func podRunning(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, Ready: true}}
}

func podExited(code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		reason := "Error"
		if code == 0 {
			p.Status.Phase, reason = corev1.PodSucceeded, "Completed"
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
}

// fakeLogs serves every pod the two lines "<pod> says hello" and "<pod> says bye", written a
// millisecond apart at a time of the pod's own, so that the pods' lines interleave.
type fakeLogs struct {
	mu     sync.Mutex
	starts map[string]time.Time
	opened []string
}

func useFakeLogs(t *testing.T, starts map[string]time.Time) *fakeLogs {
	f := &fakeLogs{starts: starts}
	old := newLogSource
	newLogSource = func(kubernetes.Interface) jobwatch.LogSource { return f }
	t.Cleanup(func() { newLogSource = old })
	return f
}

func (f *fakeLogs) Open(_ context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, fmt.Sprintf("%s previous=%v follow=%v", pod.Name, opts.Previous, opts.Follow))
	start, ok := f.starts[pod.Name]
	if !ok {
		start = time.Unix(1000, 0)
	}
	run := ""
	if opts.Previous {
		run = " (previous run)"
	}
	var b bytes.Buffer
	for i, word := range []string{"hello", "bye"} {
		fmt.Fprintf(&b, "%s %s says %s%s\n", start.Add(time.Duration(i)*time.Millisecond).UTC().Format(time.RFC3339Nano), pod.Name, word, run)
	}
	return io.NopCloser(&b), nil
}

// writeJob writes a manifest into the test's directory and returns its path.
func writeJob(t *testing.T, dir, name, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	must(t, os.WriteFile(path, []byte(strings.TrimSpace(yaml)+"\n"), 0o644))
	return path
}

// syncBuffer is a bytes.Buffer safe for the writers of Run.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
