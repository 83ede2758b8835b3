package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// plan is what a job's pods will do, fixed when the job is made.
type plan int

const (
	// succeed: the master exits 0 after a while.
	succeed plan = iota
	// retry: worker 0 is killed (exit 137, retryable) retries times, each time in a new pod;
	// the master exits 0 once the last of them runs. The job ends with exactly retries restarts.
	retry
	// fail: worker 1 exits 1 (permanent); the job fails with no restart.
	fail
)

// retries is how often worker 0 of a retry job is killed.
const retries = 2

func (p plan) String() string { return [...]string{"succeed", "retry", "fail"}[p] }

// planOf spreads the plans evenly over the jobs.
func planOf(i int) plan { return plan(i % 3) }

func jobName(i int) string { return fmt.Sprintf("job-%03d", i) }

// newJob is 1 master, 2 workers and 1 parameter server.
func newJob(ns string, i int) *v1beta1.TfJob {
	group := func(typ v1beta1.TfReplicaType, n int32) v1beta1.TfReplicaSpec {
		return v1beta1.TfReplicaSpec{TfReplicaType: typ, Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}},
		}}}
	}
	return &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: jobName(i)},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
			group(v1beta1.TfReplicaMaster, 1), group(v1beta1.TfReplicaWorker, 2), group(v1beta1.TfReplicaPS, 1),
		}},
	}
}

// expectedPods are the pod (and service) names of job i.
func expectedPods(i int) []string {
	j := jobName(i)
	return []string{j + "-master-0", j + "-worker-0", j + "-worker-1", j + "-ps-0"}
}

// kubelet plays the kubelet for one namespace. It watches pods through an informer (so it sees
// every pod the operator makes, however briefly it lives), marks new pods running, and ends them
// as their job's plan says, each after a run time of its own. It also records every pod and
// service UID it ever saw by name: a name seen with more UIDs than the plan explains is an
// action the operator did twice.
type kubelet struct {
	t     *testing.T
	ns    string
	plans map[string]plan // by job name
	queue workqueue.TypedDelayingInterface[string]

	mu      sync.Mutex
	podUIDs map[string][]types.UID // by pod name, in the order first seen
	svcUIDs map[string][]types.UID
	since   map[types.UID]time.Time // when each pod was marked running
	reader  client.Reader
	writes  int
	// finishedDeletes counts the deletions the kubelet finished for the operator.
	finishedDeletes int
}

// startKubelet runs the simulated kubelet on ns until the test ends.
func startKubelet(t *testing.T, ns string, jobs int) *kubelet {
	t.Helper()
	k := &kubelet{
		t: t, ns: ns, plans: map[string]plan{},
		queue:   workqueue.NewTypedDelayingQueue[string](),
		podUIDs: map[string][]types.UID{}, svcUIDs: map[string][]types.UID{}, since: map[types.UID]time.Time{},
	}
	for i := range jobs {
		k.plans[jobName(i)] = planOf(i)
	}
	c, err := cache.New(jobtest.Config, cache.Options{Scheme: operator.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	jobtest.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	podInformer, err := c.GetInformer(ctx, &corev1.Pod{})
	jobtest.Must(t, err)
	svcInformer, err := c.GetInformer(ctx, &corev1.Service{})
	jobtest.Must(t, err)
	_, err = podInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sawPod(obj) },
		UpdateFunc: func(_, obj any) { k.sawPod(obj) },
	})
	jobtest.Must(t, err)
	_, err = svcInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := obj.(*corev1.Service); ok {
				k.record(k.svcUIDs, svc.Name, svc.UID)
			}
		},
	})
	jobtest.Must(t, err)
	k.reader = c
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				name, shutdown := k.queue.Get()
				if shutdown {
					return
				}
				k.handle(ctx, name)
				k.queue.Done(name)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		k.queue.ShutDown()
		wg.Wait()
	})
	return k
}

func (k *kubelet) sawPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.record(k.podUIDs, pod.Name, pod.UID)
	k.queue.Add(pod.Name)
}

func (k *kubelet) record(uids map[string][]types.UID, name string, uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, u := range uids[name] {
		if u == uid {
			return
		}
	}
	uids[name] = append(uids[name], uid)
}

// incarnation is the how-manieth pod of that name this one is, from 0.
func (k *kubelet) incarnation(name string, uid types.UID) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, u := range k.podUIDs[name] {
		if u == uid {
			return i
		}
	}
	return -1
}

// runTime is how long a pod runs before its planned exit: 0.5-3 s, fixed per pod, so that a
// job lives across several kills.
func runTime(uid types.UID) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(uid))
	return 500*time.Millisecond + time.Duration(h.Sum32()%2500)*time.Millisecond
}

// handle moves one pod on: pending to running, running to its planned exit.
func (k *kubelet) handle(ctx context.Context, name string) {
	var pod corev1.Pod
	if err := k.reader.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: name}, &pod); err != nil {
		return // deleted; a new pod of the name is a new event
	}
	if pod.DeletionTimestamp != nil {
		// A pod being deleted is the kubelet's to remove: it stops the containers, then deletes
		// the pod with grace period 0. The apiserver removes an unscheduled pod itself, at
		// once; but a deletion marked and not finished was seen here when the operator was
		// SIGKILLed mid-clean-up, and in a real cluster the kubelet (or the pod GC) finishes
		// it. Given a moment first, so that only those are counted.
		if wait := 2*time.Second - time.Since(pod.DeletionTimestamp.Time); wait > 0 {
			k.queue.AddAfter(name, wait)
			return
		}
		zero := int64(0)
		if jobtest.Client.Delete(ctx, &pod, &client.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}}) == nil {
			k.mu.Lock()
			k.finishedDeletes++
			k.mu.Unlock()
		}
		return
	}
	switch pod.Status.Phase {
	case "", corev1.PodPending:
		k.write(ctx, &pod, corev1.PodRunning, 0)
	case corev1.PodRunning:
		code, wait, exit := k.decide(&pod)
		if exit {
			phase := corev1.PodFailed
			if code == 0 {
				phase = corev1.PodSucceeded
			}
			k.write(ctx, &pod, phase, code)
		} else if wait > 0 {
			k.queue.AddAfter(name, wait)
		}
	}
}

// decide says whether a running pod exits now, with which code, or when to look again.
func (k *kubelet) decide(pod *corev1.Pod) (code int32, wait time.Duration, exit bool) {
	job := pod.Labels[v1beta1.LabelJobName]
	typ := pod.Labels[v1beta1.LabelReplicaType]
	index, _ := strconv.Atoi(pod.Labels[v1beta1.LabelReplicaIndex])
	p, ok := k.plans[job]
	if !ok {
		return 0, 0, false
	}
	k.mu.Lock()
	since, running := k.since[pod.UID]
	k.mu.Unlock()
	if !running {
		return 0, 200 * time.Millisecond, false // running, but not by our hand yet (informer lag)
	}
	if left := runTime(pod.UID) - time.Since(since); left > 0 {
		if p == succeed && typ == "master" || p == retry || p == fail && typ == "worker" && index == 1 {
			return 0, left, false
		}
		return 0, 0, false
	}
	switch {
	case p == succeed && typ == "master":
		return 0, 0, true
	case p == fail && typ == "worker" && index == 1:
		return 1, 0, true
	case p == retry && typ == "worker" && index == 0 && k.incarnation(pod.Name, pod.UID) < retries:
		return 137, 0, true
	case p == retry && typ == "master":
		// The master finishes once the last incarnation of worker 0 is running.
		w := job + "-worker-0"
		k.mu.Lock()
		uids := k.podUIDs[w]
		last := len(uids) > retries && !k.since[uids[len(uids)-1]].IsZero()
		k.mu.Unlock()
		if last {
			return 0, 0, true
		}
		return 0, 200 * time.Millisecond, false
	}
	return 0, 0, false
}

// write sets the pod's phase as a kubelet would, on this very pod (UID precondition), retrying
// while the apiserver is away.
func (k *kubelet) write(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase, code int32) {
	now := metav1.Now()
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	ready := corev1.ConditionTrue
	if phase != corev1.PodRunning {
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}}
		ready = corev1.ConditionFalse
	}
	uid := pod.UID
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			var fresh corev1.Pod
			err := jobtest.Client.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: pod.Name}, &fresh)
			if apierrors.IsNotFound(err) || err == nil && (fresh.UID != uid || fresh.DeletionTimestamp != nil) {
				return
			}
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			pod = &fresh
		}
		pod.Status.Phase = phase
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}}
		pod.Status.ContainerStatuses = jobtest.ContainerStatus(pod, state, 0)
		err := jobtest.Client.Status().Update(ctx, pod)
		if err == nil {
			k.mu.Lock()
			k.writes++
			if phase == corev1.PodRunning {
				k.since[uid] = time.Now()
			}
			k.mu.Unlock()
			if phase == corev1.PodRunning {
				k.queue.AddAfter(pod.Name, runTime(uid))
			}
			return
		}
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
