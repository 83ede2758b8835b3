package follow

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The end of a failed job names the replica that failed first: where it ran, how it exited and
// how that was judged, and its last words, each line indented under them.
func TestFirstFailure(t *testing.T) {
	code := int32(1)
	for _, tc := range []struct {
		name string
		f    *v1beta1.ReplicaFailure
		want []string
	}{
		{"none", nil, nil},
		{"an exit with last words", &v1beta1.ReplicaFailure{Replica: "worker 1", Pod: "fail-worker-1", Node: "kind-worker2",
			ExitCode: &code, Reason: "Error", Judged: "permanent: 1-127",
			LastWords: "[...]\nTraceback (most recent call last):\r\n  File \"train.py\", line 3\nRuntimeError: CUDA out of memory\n"},
			[]string{
				"first failure: worker 1 (pod fail-worker-1, node kind-worker2): exit code 1 (Error; permanent: 1-127)",
				"  last words:",
				"    [...]",
				"    Traceback (most recent call last):",
				"      File \"train.py\", line 3",
				"    RuntimeError: CUDA out of memory",
			}},
		{"evicted, on no known node, silent", &v1beta1.ReplicaFailure{Replica: "ps 0", Pod: "j-ps-0", Reason: "Evicted", LastWords: "\n"},
			[]string{"first failure: ps 0 (pod j-ps-0): Evicted"}},
	} {
		if got := FirstFailure(tc.f); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
