package jobwatch

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// These tests watch on a real kube-apiserver; no operator runs, so the tests make the pods an
// operator would, and the ones it would not.

func TestMain(m *testing.M) { jobtest.Main(m, nil) }

// seen collects what an informer hands over: the names upserted and removed, in order, the
// kinds of the objects, and whether it has synced.
type seen struct {
	mu      sync.Mutex
	upserts []string
	removes []string
	objs    []any
	errs    []error
	synced  bool
}

func (s *seen) informer(src Source) Informer {
	return Informer{
		Source: src,
		Upsert: func(obj any) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.upserts = append(s.upserts, obj.(metav1.Object).GetName())
			s.objs = append(s.objs, obj)
		},
		Remove: func(obj any) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.removes = append(s.removes, obj.(metav1.Object).GetName())
		},
		Synced: func() { s.mu.Lock(); s.synced = true; s.mu.Unlock() },
		Report: func(err error) {
			if err != nil {
				s.mu.Lock()
				s.errs = append(s.errs, err)
				s.mu.Unlock()
			}
		},
	}
}

func (s *seen) wait(t *testing.T, what string, cond func(*seen) bool) {
	t.Helper()
	jobtest.Eventually(t, what, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.errs) > 0 {
			t.Fatalf("a list or watch failed: %v", s.errs)
		}
		if !cond(s) {
			return jobtest.Errorf("upserts %v, removes %v, synced %v", s.upserts, s.removes, s.synced)
		}
		return nil
	})
}

func replicaPod(ns, name string, labels map[string]string, owner client.Object) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mlkube/trainer:test"}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1beta1.GroupVersion.WithKind(v1beta1.KindOf(owner).Name))}
	}
	return p
}

// Pods lists and watches a job's replica pods, of every kind, and no other: not its TensorBoard
// pod, not another job's, not a pod of another kind's job of the same name. Job watches the job
// of the name, decoded into its kind's type, and no other job.
func TestPodsAndJobOfEveryKind(t *testing.T) {
	ns := jobtest.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube, err := kubernetes.NewForConfig(jobtest.Config)
	jobtest.Must(t, err)
	c, err := client.NewWithWatch(jobtest.Config, client.Options{Scheme: operator.Scheme()})
	jobtest.Must(t, err)

	for i, k := range v1beta1.Kinds {
		name := "j-" + k.Label()
		job := jobtest.NewJob(k, ns, name)
		jobtest.Must(t, c.Create(ctx, job))
		jobtest.Must(t, c.Create(ctx, jobtest.NewJob(k, ns, name+"-other")))
		typ := k.Types[0]
		mine := replicaPod(ns, name+"-0", k.ReplicaLabels(name, typ, 0), job)
		tensorboard := replicaPod(ns, name+"-tensorboard", map[string]string{v1beta1.LabelJobName: name, v1beta1.LabelJobKind: k.Label()}, job)
		other := replicaPod(ns, name+"-other-0", k.ReplicaLabels(name+"-other", typ, 0), nil)
		otherKind := v1beta1.Kinds[(i+1)%len(v1beta1.Kinds)]
		sameNameOtherKind := replicaPod(ns, name+"-as-"+otherKind.Label(), otherKind.ReplicaLabels(name, otherKind.Types[0], 0), nil)
		for _, p := range []*corev1.Pod{mine, tensorboard, other, sameNameOtherKind} {
			jobtest.Must(t, c.Create(ctx, p))
		}

		pods, jobs := &seen{}, &seen{}
		pods.informer(Pods(kube.CoreV1().Pods(ns), k, name)).Run(ctx)
		jobs.informer(Job(c, k, ns, name)).Run(ctx)
		pods.wait(t, k.Name+"'s replica pod", func(s *seen) bool { return s.synced && len(s.upserts) == 1 })
		if pods.upserts[0] != mine.Name {
			t.Errorf("%s: pods %v, want %s alone", k.Name, pods.upserts, mine.Name)
		}
		jobs.wait(t, k.Name+" "+name, func(s *seen) bool { return s.synced && len(s.upserts) == 1 })
		if got := jobs.objs[0].(client.Object); got.GetName() != name || v1beta1.KindOf(got) != k {
			t.Errorf("%s: job %T %s, want the %s %s", k.Name, got, got.GetName(), k.Name, name)
		}

		jobtest.Must(t, c.Delete(ctx, mine))
		pods.wait(t, k.Name+"'s replica pod deleted", func(s *seen) bool { return len(s.removes) == 1 })
		jobtest.Must(t, c.Delete(ctx, job))
		jobs.wait(t, k.Name+" "+name+" deleted", func(s *seen) bool { return len(s.removes) == 1 })
		time.Sleep(50 * time.Millisecond) // what else might come, to be caught below
		pods.mu.Lock()
		// The deletion may come as a change first (its deletionTimestamp set): mine again.
		for _, n := range append(pods.upserts, pods.removes...) {
			if n != mine.Name {
				t.Errorf("%s: pods upserted %v, removed %v; want %s alone", k.Name, pods.upserts, pods.removes, mine.Name)
				break
			}
		}
		pods.mu.Unlock()
	}
}
