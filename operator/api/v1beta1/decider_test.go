package v1beta1_test

import (
	"slices"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestDecider(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		types []string
		want  string
	}{
		{"TfJob", []string{"PS", "WORKER", "MASTER"}, "MASTER"},
		{"TfJob", []string{"CHIEF", "WORKER"}, "CHIEF"},
		{"TfJob", []string{"WORKER", "PS", "EVALUATOR"}, "WORKER"},
		{"TfJob", []string{"PS", "EVALUATOR"}, ""}, // the CRD refuses such a job
		{"MXJob", []string{"WORKER", "SERVER", "SCHEDULER"}, "SCHEDULER"},
		{"PyTorchJob", []string{"WORKER", "MASTER"}, "MASTER"},
		{"JAXJob", []string{"WORKER"}, "WORKER"},
	} {
		var groups []v1beta1.ReplicaGroup
		for _, typ := range tc.types {
			groups = append(groups, v1beta1.ReplicaGroup{Type: typ})
		}
		if got := v1beta1.KindNamed(tc.kind).Decider(groups); got != tc.want {
			t.Errorf("%s of %v: decider %q, want %q", tc.kind, tc.types, got, tc.want)
		}
	}
}

// TestDecidersAreTypes: a decider the CRD's enum does not list could never be in a job.
func TestDecidersAreTypes(t *testing.T) {
	for _, k := range v1beta1.Kinds {
		if len(k.Deciders) == 0 {
			t.Errorf("%s has no deciders: none of its jobs could succeed", k.Name)
		}
		for _, d := range k.Deciders {
			if !slices.Contains(k.Types, d) {
				t.Errorf("%s: decider %s is not one of its types %v", k.Name, d, k.Types)
			}
		}
	}
}
