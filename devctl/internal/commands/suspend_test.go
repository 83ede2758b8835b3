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
