package replicajob_test

import (
	"context"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The operator leaves to the apiserver only the check of jobs created under the CRD it carries
// (operator/admitted). A job of every kind stored while its CRD allowed a negative backoffLimit
// (a loosened CRD, as an older or hand-edited one would) is checked again once the CRD is put
// back: it fails as InvalidSpec naming the field, with no pod. Beside it a job created under the
// CRD as shipped runs.
func TestAJobStoredUnderAnotherCRDIsCheckedAgain(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const field = "spec.runPolicy.backoffLimit"
	var bad []*unstructured.Unstructured
	for _, k := range v1beta1.Kinds {
		u := jobtest.Unstructured(t, jobtest.NewJob(k, ns, "loose-"+k.Label()))
		must(t, unstructured.SetNestedField(u.Object, int64(-5), strings.Split(field, ".")...))
		bad = append(bad, u)
	}
	jobtest.StoreUnreadable(t, cfg, []string{field}, bad...)
	startOperator(t, ns)
	runGoodJobs(t, ns)
	for _, k := range v1beta1.Kinds {
		name := "loose-" + k.Label()
		eventually(t, name+" Failed", func() error {
			job := k.New()
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, job); err != nil {
				return err
			}
			c := apimeta.FindStatusCondition(job.JobStatus().Conditions, v1beta1.JobFailed)
			if c == nil || c.Reason != "InvalidSpec" || !strings.Contains(c.Message, "backoffLimit") || !strings.Contains(c.Message, "breaks its CRD's rules") {
				return errorf("condition %+v, want Failed InvalidSpec naming backoffLimit", c)
			}
			return nil
		})
		waitEvent(t, ns, name, "InvalidSpec", "backoffLimit")
		if pods := listPods(t, ns); len(podsIn(pods, name)) > 0 {
			t.Errorf("the operator ran %s, stored under another CRD: pods %v", name, podsIn(pods, name))
		}
	}
}
