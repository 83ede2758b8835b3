package jobwatch

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestFailureExit(t *testing.T) {
	code := int32(137)
	for _, tc := range []struct {
		f    v1beta1.ReplicaFailure
		want string
	}{
		{v1beta1.ReplicaFailure{ExitCode: &code, Reason: "OOMKilled", Judged: "permanent: OOMKilled"}, "exit code 137 (OOMKilled; permanent: OOMKilled)"},
		{v1beta1.ReplicaFailure{ExitCode: &code}, "exit code 137"},
		{v1beta1.ReplicaFailure{Reason: "Evicted"}, "Evicted"},
		{v1beta1.ReplicaFailure{}, "failed"},
	} {
		if got := FailureExit(&tc.f); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestLastWords(t *testing.T) {
	got := LastWords(&v1beta1.ReplicaFailure{LastWords: "[...]\r\nline 2  \n\nline 4\n\n"})
	if want := "[...]|line 2||line 4"; strings.Join(got, "|") != want {
		t.Errorf("%q, want %q", strings.Join(got, "|"), want)
	}
	if got := LastWords(&v1beta1.ReplicaFailure{LastWords: " \n"}); got != nil {
		t.Errorf("silence as %q", got)
	}
}
