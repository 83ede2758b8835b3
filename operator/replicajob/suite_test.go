package replicajob_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The engine's behaviour tests: outcomes (outcome_test.go), restarts (restarts_test.go),
// refusals, the unseen record, an operator restart. They run the operator against a real
// kube-apiserver and etcd (internal/jobtest), with TfJob, the richest kind, as their vehicle;
// TestConformance runs the shared part for every kind. There is no kubelet: the tests play its
// part by writing pod statuses.

var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	jobtest.Main(m, func() { cfg, k8s = jobtest.Config, jobtest.Client })
}

// kubelet writes the pod statuses a kubelet would: kubelet{T: t, NS: ns}.Running(...).
type kubelet = jobtest.Kubelet

func namespace(t *testing.T) string { t.Helper(); return jobtest.Namespace(t) }

func startOperator(t *testing.T, ns string, mutate ...func(*operator.Options)) func() {
	t.Helper()
	return jobtest.StartOperator(t, ns, mutate...)
}

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	jobtest.Eventually(t, what, f)
}

func retry(f func() error) error { return jobtest.Retry(f) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func itoa(i int) string { return fmt.Sprint(i) }

func listPods(t *testing.T, ns string) map[string]corev1.Pod {
	t.Helper()
	return jobtest.ListPods(t, ns)
}

func listServices(t *testing.T, ns string) map[string]corev1.Service {
	t.Helper()
	return jobtest.ListServices(t, ns)
}

func waitPods(t *testing.T, ns string, names ...string) map[string]corev1.Pod {
	t.Helper()
	return jobtest.WaitPods(t, ns, names...)
}

func events(t *testing.T, ns, job string) []eventsv1.Event {
	t.Helper()
	return jobtest.Events(t, ns, job)
}

func waitEvent(t *testing.T, ns, job, reason string, parts ...string) eventsv1.Event {
	t.Helper()
	return jobtest.WaitEvent(t, ns, job, reason, parts...)
}

func containerStatus(pod *corev1.Pod, state corev1.ContainerState, restarts int32) []corev1.ContainerStatus {
	return jobtest.ContainerStatus(pod, state, restarts)
}

// replicaGroup is a replica group running a trivial tensorflow container.
func replicaGroup(typ v1beta1.TfReplicaType, replicas int32) v1beta1.TfReplicaSpec {
	return v1beta1.TfReplicaSpec{
		TfReplicaType: typ,
		Replicas:      replicas,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test"}},
		}},
	}
}

func newJob(ns, name string, groups ...v1beta1.TfReplicaSpec) *v1beta1.TfJob {
	return &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1beta1.TfJobSpec{ReplicaSpecs: groups},
	}
}

// standardJob is 1 master, 2 workers and 2 parameter servers.
func standardJob(ns, name string) *v1beta1.TfJob {
	return newJob(ns, name,
		replicaGroup(v1beta1.TfReplicaMaster, 1),
		replicaGroup(v1beta1.TfReplicaWorker, 2),
		replicaGroup(v1beta1.TfReplicaPS, 2))
}

func getJob(t *testing.T, ns, name string) *v1beta1.TfJob {
	t.Helper()
	return jobtest.GetJob[v1beta1.TfJob](t, ns, name)
}

// waitJob waits until the job satisfies cond.
func waitJob(t *testing.T, ns, name, what string, cond func(*v1beta1.TfJob) error) *v1beta1.TfJob {
	t.Helper()
	return jobtest.WaitJob[v1beta1.TfJob](t, ns, name, what, cond)
}

func inState(state v1beta1.JobState, phase v1beta1.JobPhase) func(*v1beta1.TfJob) error {
	return func(j *v1beta1.TfJob) error {
		if j.Status.State != state || j.Status.Phase != phase {
			return fmt.Errorf("state %q phase %q, want %q %q; conditions %+v", j.Status.State, j.Status.Phase, state, phase, j.Status.Conditions)
		}
		return nil
	}
}

func condition(j *v1beta1.TfJob, typ string) *metav1.Condition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func replicaStatus(j *v1beta1.TfJob, typ string) v1beta1.ReplicaStatus {
	for _, rs := range j.Status.ReplicaStatuses {
		if rs.Type == typ {
			return rs
		}
	}
	return v1beta1.ReplicaStatus{}
}

func podNames(job string) []string {
	return []string{job + "-master-0", job + "-worker-0", job + "-worker-1", job + "-ps-0", job + "-ps-1"}
}
