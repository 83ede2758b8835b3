package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// A job's replicas are listed deciders first, then as the kind's CRD lists its types: the row
// that ends the job is the one a user looks for.
func TestReplicasDecidersFirst(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		types []string // as the pods are labelled, in no order
		want  string
	}{
		{"TfJob", []string{"ps", "evaluator", "worker", "chief", "worker"}, "chief-0 worker-0 worker-1 ps-0 evaluator-0"},
		{"TfJob", []string{"ps", "worker", "worker"}, "worker-0 worker-1 ps-0"},
		{"MXJob", []string{"worker", "server", "scheduler"}, "scheduler-0 server-0 worker-0"},
		{"PyTorchJob", []string{"worker", "worker", "master"}, "master-0 worker-0 worker-1"},
		{"TfJob", []string{"sidecar", "master"}, "master-0 sidecar-0"}, // a type the kind does not know goes last
	} {
		v := newJobView(newStyles(true), kube.JobKey{Kind: tc.kind, Namespace: "ns", Name: "j"}, 0)
		count := map[string]int{}
		for _, typ := range tc.types {
			name := fmt.Sprintf("j-%s-%d", typ, count[typ])
			r := &kube.Replica{Type: typ, Index: count[typ]}
			r.Name = name
			v.replicas[name] = r
			count[typ]++
		}
		v.sortReplicas()
		var got []string
		for _, r := range v.shown {
			got = append(got, fmt.Sprintf("%s-%d", r.Type, r.Index))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %s, want %s", tc.kind, strings.Join(got, " "), tc.want)
		}
	}
}

// Refused several kinds, a user reads the first kind's refusal first, whatever order they came
// back in: the status lines hold four, and a third refusal would push TfJob's out of sight.
func TestErrorsInTheKindsOrder(t *testing.T) {
	m := Model{errs: map[string]kube.WatchFailed{}}
	for _, f := range []kube.WatchFailed{
		{Source: "pods of TfJob ns/a"},
		{Source: "jaxjobs.mlkube.io in namespace ns", Kind: "JAXJob"},
		{Source: "pytorchjobs.mlkube.io in namespace ns", Kind: "PyTorchJob"},
		{Source: "tfjobs.mlkube.io in namespace ns", Kind: "TfJob"},
	} {
		m.errs[f.Source] = f
		m.errOrder = append(m.errOrder, f.Source)
	}
	want := "tfjobs.mlkube.io in namespace ns|pytorchjobs.mlkube.io in namespace ns|jaxjobs.mlkube.io in namespace ns|pods of TfJob ns/a"
	if got := strings.Join(m.errorsShown(), "|"); got != want {
		t.Errorf("errors shown as\n%s\nwant\n%s", got, want)
	}
}

// "reported 12s ago" moves on with the clock: the view ticks when the last report's age changes.
func TestJobViewTicksWithTheLastReport(t *testing.T) {
	now := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	v := newJobView(newStyles(true), kube.JobKey{Kind: "TfJob", Namespace: "ns", Name: "j"}, 0)
	job := &kube.Job{Progress: &v1beta1.JobProgress{ReportTime: metav1.NewTime(now.Add(-12*time.Second - 300*time.Millisecond))}}
	if got := v.nextTick(now, job); got != 700*time.Millisecond {
		t.Errorf("next tick in %s, want 700ms", got)
	}
	if got := v.nextTick(now, &kube.Job{}); got != 0 {
		t.Errorf("no report: next tick in %s", got)
	}
}
