package commands

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestCountStates(t *testing.T) {
	// Any kind: the states are read through v1beta1.Job.
	job := func(s v1beta1.JobState) runtime.Object {
		var j v1beta1.PyTorchJob
		j.Status.State = s
		return &j
	}
	suspended := job(v1beta1.JobStateRunning).(*v1beta1.PyTorchJob)
	suspended.Status.Phase = v1beta1.JobPhaseSuspended
	// Unreadable: whatever its status says, nothing acts on it.
	var unreadable v1beta1.PyTorchJob
	if err := unreadable.UnmarshalJSON([]byte(`{"spec":{"runPolicy":{"ttlSecondsAfterFinished":2592000000}},"status":{"state":"Running"}}`)); err != nil || unreadable.Unreadable() == "" {
		t.Fatalf("no unreadable job to count: %v", err)
	}
	got := countStates([]runtime.Object{
		job(v1beta1.JobStateFailed), &unreadable, job(v1beta1.JobStateRunning), job(""), suspended, job(v1beta1.JobStateRunning), job(v1beta1.JobStateSucceeded),
	})
	if want := "1 New, 2 Running, 1 Suspended, 1 Succeeded, 1 Failed, 1 Unreadable"; got != want {
		t.Errorf("countStates = %q, want %q", got, want)
	}
	if got := countStates(nil); got != "none" {
		t.Errorf("countStates of none = %q", got)
	}
}
