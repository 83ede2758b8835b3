package replicajob_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// A job an older operator started, with a service per replica, keeps that layout under this
// operator until it ends: a replica recreated after a retryable exit gets the addresses its
// peers were told, no job service appears beside the old ones, and at the end nothing is left.
func TestJobOfAnOlderOperatorKeepsItsLayoutToTheEnd(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	job := standardJob(ns, "old")
	job.Spec.RunPolicy.CleanPodPolicy = v1beta1.CleanPodPolicyAll
	must(t, k8s.Create(ctx, job))

	// What the older operator made: for each replica, a headless service of its own and a pod
	// told the others' addresses as <job>-<type>-<index>.<ns>.svc.
	owner := *metav1.NewControllerRef(job, v1beta1.GroupVersion.WithKind("TfJob"))
	oldAddrs := map[string][]string{}
	for _, name := range podNames("old") {
		typ := strings.Split(name, "-")[1]
		oldAddrs[typ] = append(oldAddrs[typ], name+"."+ns+".svc:2222")
	}
	for _, name := range podNames("old") {
		parts := strings.Split(name, "-")
		labels := map[string]string{v1beta1.LabelJobName: "old", v1beta1.LabelJobKind: "tfjob",
			v1beta1.LabelReplicaType: parts[1], v1beta1.LabelReplicaIndex: parts[2]}
		meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}}
		must(t, k8s.Create(ctx, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: labels, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: "replica-port", Port: 2222}},
		}}))
		index, _ := strconv.Atoi(parts[2])
		cfg, _ := json.Marshal(tfjob.Config{Cluster: oldAddrs, Task: tfjob.Task{Type: parts[1], Index: index}, Environment: "cloud"})
		must(t, k8s.Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:test",
				Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: string(cfg)}}}}}}))
	}

	startOperator(t, ns)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("old")...)
	waitJob(t, ns, "old", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))

	// A worker killed (137) is recreated in the old layout, told the old addresses.
	before := listPods(t, ns)["old-worker-1"].UID
	kl.Exit("old-worker-1", 137, "Error")
	var pod corev1.Pod
	eventually(t, "old-worker-1 recreated", func() error {
		p, ok := listPods(t, ns)["old-worker-1"]
		if !ok || p.UID == before {
			return errorf("not yet")
		}
		pod = p
		return nil
	})
	var cfg tfjob.Config
	must(t, json.Unmarshal([]byte(pod.Spec.Containers[0].Env[0].Value), &cfg))
	if pod.Spec.Subdomain != "" || !equalCluster(cfg.Cluster, oldAddrs) {
		t.Errorf("recreated pod: subdomain %q, cluster %v, want the old layout's %v", pod.Spec.Subdomain, cfg.Cluster, oldAddrs)
	}
	svcs := listServices(t, ns)
	if _, made := svcs["old"]; made || len(svcs) != 5 {
		t.Errorf("services %v: want the 5 of the old layout and no job service", slices.Sorted(maps.Keys(svcs)))
	}

	// The master's exit 0 ends the job; clean-up (All) leaves nothing.
	kl.Running("old-worker-1")
	kl.Exit("old-master-0", 0, "Completed")
	waitJob(t, ns, "old", "succeeded", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))
	eventually(t, "nothing left", func() error {
		if pods, svcs := listPods(t, ns), listServices(t, ns); len(pods)+len(svcs) != 0 {
			return errorf("pods %v services %v", slices.Sorted(maps.Keys(pods)), slices.Sorted(maps.Keys(svcs)))
		}
		return nil
	})
}
