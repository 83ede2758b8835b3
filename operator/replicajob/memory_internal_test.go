package replicajob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Each thing the engine remembers of a job belongs to that job's UID: a job created again under
// the name has none of it, and forgetting a name forgets all of it.
func TestMemoryIsTheJobsOwn(t *testing.T) {
	now := time.Now()
	job := func(uid string) metav1.Object {
		return &metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: types.UID(uid)}
	}
	remember := func(m *memory) {
		m.lastWrite = now
		m.add("pod/job-worker-0", now)
		m.failed(now)
		m.resolved = &resolved{generation: 1}
	}
	blank := func(t *testing.T, m *memory, what string) {
		t.Helper()
		if !m.lastWrite.IsZero() {
			t.Errorf("%s: last status write inherited", what)
		}
		if m.pending("pod/job-worker-0", now) > 0 {
			t.Errorf("%s: created-but-unseen objects inherited", what)
		}
		if m.wait(now) > 0 {
			t.Errorf("%s: refusal backoff inherited", what)
		}
		if m.resolved != nil {
			t.Errorf("%s: checked cluster inherited", what)
		}
	}

	var jobs memories
	remember(jobs.of(job("old")))
	if m := jobs.of(job("old")); m.wait(now) == 0 || m.pending("pod/job-worker-0", now) == 0 {
		t.Fatal("a job's memory is not kept between reconciles")
	}
	blank(t, jobs.of(job("new")), "a job created again under the name")
	if jobs.len() != 1 {
		t.Errorf("%d jobs remembered, want 1: the old job's memory is kept", jobs.len())
	}

	remember(jobs.of(job("new")))
	jobs.forget(types.NamespacedName{Namespace: "ns", Name: "job"})
	if jobs.len() != 0 {
		t.Errorf("%d jobs remembered after forget, want 0", jobs.len())
	}
	blank(t, jobs.of(job("new")), "a job forgotten")
}
