package commands

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// devctl suspend and resume flip runPolicy.suspend and return once the operator says it acted;
// a second suspend says it already is.
func TestSuspendAndResume(t *testing.T) {
	ns := envtest(t)
	startOperator(t, ns)
	ctx := context.Background()
	job := &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{{
			TfReplicaType: v1beta1.TfReplicaWorker,
			Template:      corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "x"}}}},
		}}},
	}
	must(t, k8s.Create(ctx, job))
	eventually(t, "its pod", func() error {
		var pods corev1.PodList
		must(t, k8s.List(ctx, &pods))
		for _, p := range pods.Items {
			if p.Namespace == ns {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})

	var out bytes.Buffer
	must(t, Suspend(ctx, SuspendOptions{Job: "q", Namespace: ns, Suspend: true, Wait: 30 * time.Second}, &out))
	if s := out.String(); !strings.Contains(s, "tfjob/q: runPolicy.suspend set to true") || !strings.Contains(s, "tfjob/q suspended: runPolicy.suspend is true") {
		t.Errorf("devctl suspend said:\n%s", s)
	}
	out.Reset()
	must(t, Suspend(ctx, SuspendOptions{Job: "q", Namespace: ns, Suspend: true, Wait: 30 * time.Second}, &out))
	if s := out.String(); !strings.Contains(s, "tfjob/q is suspended already") {
		t.Errorf("a second devctl suspend said:\n%s", s)
	}
	out.Reset()
	must(t, Suspend(ctx, SuspendOptions{Job: "q", Namespace: ns, Suspend: false, Wait: 30 * time.Second}, &out))
	if s := out.String(); !strings.Contains(s, "tfjob/q resumed: runPolicy.suspend is false") {
		t.Errorf("devctl resume said:\n%s", s)
	}
	err := Suspend(ctx, SuspendOptions{Job: "nope", Namespace: ns, Suspend: true}, &out)
	if err == nil || !strings.Contains(err.Error(), "no tfjob/nope") {
		t.Errorf("suspending a job that is not there: %v", err)
	}
}

// With no operator acting on the job, devctl suspend says so when its wait ends, and how to look.
func TestSuspendWithoutAnOperator(t *testing.T) {
	ns := envtest(t)
	ctx := context.Background()
	must(t, k8s.Create(ctx, &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alone"},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{{
			TfReplicaType: v1beta1.TfReplicaWorker,
			Template:      corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "x"}}}},
		}}},
	}))
	var out bytes.Buffer
	err := Suspend(ctx, SuspendOptions{Job: "alone", Namespace: ns, Suspend: true, Wait: time.Second}, &out)
	if err == nil || !strings.Contains(err.Error(), "tfjob/alone: runPolicy.suspend is true, but the operator has not said it suspended the job after 1s") ||
		!strings.Contains(err.Error(), "devctl status") {
		t.Errorf("error %v", err)
	}
	var job v1beta1.TfJob
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alone"}, &job))
	if !job.Spec.RunPolicy.Suspended() {
		t.Errorf("runPolicy.suspend not set: %+v", job.Spec.RunPolicy)
	}
}
