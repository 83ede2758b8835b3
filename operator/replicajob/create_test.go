package replicajob_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/tfjob"
)

func TestCreatesPodsServicesAndTFConfig(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "mnist")
	must(t, k8s.Create(context.Background(), job))

	pods := waitPods(t, ns, podNames("mnist")...)
	var svcs map[string]corev1.Service
	eventually(t, "services", func() error {
		svcs = listServices(t, ns)
		if len(svcs) != 1 {
			return errorf("want 1 service, the job's, have %d", len(svcs))
		}
		return nil
	})
	job = getJob(t, ns, "mnist")

	wantCluster := map[string][]string{
		"master": {"mnist-master-0.mnist." + ns + ".svc:2222"},
		"worker": {"mnist-worker-0.mnist." + ns + ".svc:2222", "mnist-worker-1.mnist." + ns + ".svc:2222"},
		"ps":     {"mnist-ps-0.mnist." + ns + ".svc:2222", "mnist-ps-1.mnist." + ns + ".svc:2222"},
	}
	for name, pod := range pods {
		typ, index := pod.Labels[v1beta1.LabelReplicaType], pod.Labels[v1beta1.LabelReplicaIndex]
		if name != "mnist-"+typ+"-"+index || pod.Labels[v1beta1.LabelJobName] != "mnist" {
			t.Errorf("pod %s has labels %v", name, pod.Labels)
		}
		if ref := pod.OwnerReferences; len(ref) != 1 || ref[0].UID != job.UID || ref[0].Controller == nil || !*ref[0].Controller {
			t.Errorf("pod %s owner references %+v, want the job as controller", name, ref)
		}
		if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("pod %s restartPolicy %s; under ExitCode the operator restarts, not the kubelet", name, pod.Spec.RestartPolicy)
		}
		var cfg tfjob.Config
		env := pod.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "TF_CONFIG" {
			t.Fatalf("pod %s env %+v, want TF_CONFIG", name, env)
		}
		must(t, json.Unmarshal([]byte(env[0].Value), &cfg))
		if cfg.Task.Type != typ || itoa(cfg.Task.Index) != index || cfg.Environment != "cloud" {
			t.Errorf("pod %s task %+v environment %q", name, cfg.Task, cfg.Environment)
		}
		if !equalCluster(cfg.Cluster, wantCluster) {
			t.Errorf("pod %s cluster %v, want %v", name, cfg.Cluster, wantCluster)
		}

		// Its address, <pod>.mnist.<ns>.svc, through the job's service.
		if pod.Spec.Hostname != name || pod.Spec.Subdomain != "mnist" {
			t.Errorf("pod %s hostname %q subdomain %q", name, pod.Spec.Hostname, pod.Spec.Subdomain)
		}
	}
	svc := svcs["mnist"]
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses || len(svc.Spec.Ports) != 0 {
		t.Errorf("the job's service: clusterIP %q ports %+v publishNotReady %v", svc.Spec.ClusterIP, svc.Spec.Ports, svc.Spec.PublishNotReadyAddresses)
	}
	if want := map[string]string{v1beta1.LabelJobName: "mnist", v1beta1.LabelJobKind: "tfjob"}; !maps.Equal(svc.Spec.Selector, want) {
		t.Errorf("the job's service selects %v, want %v", svc.Spec.Selector, want)
	}

	job = waitJob(t, ns, "mnist", "Created condition", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobCreated); c == nil || c.Status != "True" {
			return errorf("Created condition %+v", c)
		}
		return nil
	})
	if job.Status.Phase != v1beta1.JobPhaseCreating || job.Status.State != v1beta1.JobStateRunning {
		t.Errorf("before any pod runs: phase %s state %s, want Creating Running", job.Status.Phase, job.Status.State)
	}
	if job.Status.StartTime == nil {
		t.Error("startTime not set")
	}
	waitEvent(t, ns, "mnist", "Created", "created 5 pods and 1 service")

	// All running: phase Running, Running condition, ready counts in the summary column.
	kubelet{T: t, NS: ns}.Running(podNames("mnist")...)
	job = waitJob(t, ns, "mnist", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	if c := condition(job, v1beta1.JobRunning); c == nil || c.Status != "True" {
		t.Errorf("Running condition %+v", c)
	}
	waitJob(t, ns, "mnist", "summary", func(j *v1beta1.TfJob) error {
		if j.Status.Replicas != "master 1/1 worker 2/2 ps 2/2" {
			return errorf("status.replicas %q", j.Status.Replicas)
		}
		if rs := replicaStatus(j, "WORKER"); rs.Active != 2 || rs.Ready != 2 || rs.Replicas != 2 {
			return errorf("worker status %+v", rs)
		}
		return nil
	})
	if job.Status.ObservedGeneration != job.Generation {
		t.Errorf("observedGeneration %d, generation %d", job.Status.ObservedGeneration, job.Generation)
	}
}

func equalCluster(a, b map[string][]string) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// A job the CRD accepts but no container could start with (its TF_CONFIG longer than the 128 KiB
// Linux passes in one environment variable) fails at once, saying why, and creates nothing;
// it is not retried in silence.
func TestJobWhosePodsCannotBeBuiltFails(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	name := "a-long-job-name-that-makes-every-address-longer" // 48 characters, the CRD's most
	job := newJob(ns, name, replicaGroup(v1beta1.TfReplicaMaster, 1), replicaGroup(v1beta1.TfReplicaWorker, 1500))
	must(t, k8s.Create(context.Background(), job))

	job = waitJob(t, ns, name, "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	failed := condition(job, v1beta1.JobFailed)
	if failed == nil || failed.Reason != "InvalidSpec" || !strings.Contains(failed.Message, "TF_CONFIG would be") || !strings.Contains(failed.Message, "fewer replicas") {
		t.Errorf("Failed condition %+v, want reason InvalidSpec naming the TF_CONFIG size and the fix", failed)
	}
	waitEvent(t, ns, name, "InvalidSpec", "TF_CONFIG would be")
	if pods, svcs := listPods(t, ns), listServices(t, ns); len(pods)+len(svcs) != 0 {
		t.Errorf("%d pods and %d services created for a job that cannot run", len(pods), len(svcs))
	}
}
