//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job the CRD accepts but whose pods the apiserver refuses fails at once with the apiserver's
// message, which devctl run prints before it exits 1.
func refusedPod(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "refused")
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: refused
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=100ms")+`
          resources:
            requests: {cpu: "2"}
            limits: {cpu: "1"}
`)
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 1 {
		t.Fatalf("devctl run exited %d, want 1", r.code)
	}
	contains(t, "devctl run's output", r.out,
		"Failed=True (PodInvalid)", "spec.containers[0].resources.requests", "must be less than or equal to cpu limit",
		"error: tfjob/refused Failed after ")
	job := getJob(t, c, ns, "refused")
	if cond := condition(job, v1beta1.JobFailed); cond == nil || cond.Reason != "PodInvalid" {
		t.Errorf("Failed condition %+v", cond)
	}
	if r.took > time.Minute {
		t.Errorf("devctl run took %s to report a refusal", r.took)
	}
}

// A TfJob and an MXJob of one name in one namespace: the later one fails at once, naming the
// other; the first runs on.
func nameClash(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "clash")
	tf := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clash"}, Spec: v1beta1.TfJobSpec{
		ReplicaSpecs: []v1beta1.TfReplicaSpec{{TfReplicaType: "WORKER", Template: trainerTemplate("tensorflow")}}}}
	must(t, c.Create(context.Background(), tf))
	eventually(t, time.Minute, "the TfJob's worker pod", func() error {
		var pod corev1.Pod
		return c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "clash-worker-0"}, &pod)
	})
	mx := &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clash"}, Spec: v1beta1.MXJobSpec{
		ReplicaSpecs: []v1beta1.MXReplicaSpec{
			{MXReplicaType: "SCHEDULER", Template: trainerTemplate("mxnet")},
			{MXReplicaType: "WORKER", Template: trainerTemplate("mxnet")},
		}}}
	must(t, c.Create(context.Background(), mx))
	eventually(t, time.Minute, "the MXJob failed with NameClash", func() error {
		must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "clash"}, mx))
		for _, cond := range mx.Status.Conditions {
			if cond.Type == v1beta1.JobFailed && cond.Reason == "NameClash" && strings.Contains(cond.Message, "belongs to TfJob clash") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", mx.Status.Conditions)
	})
	if job := getJob(t, c, ns, "clash"); job.Status.State == v1beta1.JobStateFailed {
		t.Errorf("the TfJob failed too: %+v", job.Status.Conditions)
	}
}

func trainerTemplate(container string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: container, Image: "mlkube/trainer:dev", ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"--step-delay=100ms"},
	}}}}
}
