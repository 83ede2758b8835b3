package follow

import (
	"fmt"

	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// FirstFailure is the replica that failed first (status.firstFailure) in a few lines, for the end
// of a failed job: the cause, where the other replicas failed after it because their peer was
// gone. Its replica, pod and node, its exit and how the operator judged it, then its last words,
// indented:
//
//	first failure: worker 1 (pod fail-worker-1, node kind-worker2): exit code 1 (Error; permanent: 1-127)
//	  last words:
//	    RuntimeError: CUDA out of memory
//
// None when the status names none.
func FirstFailure(f *v1beta1.ReplicaFailure) []string {
	if f == nil {
		return nil
	}
	where := joinNonEmpty(", ", prefixed("pod ", f.Pod), prefixed("node ", f.Node))
	if where != "" {
		where = " (" + where + ")"
	}
	lines := []string{fmt.Sprintf("first failure: %s%s: %s", orWord(f.Replica, "a replica"), where, jobwatch.FailureExit(f))}
	words := jobwatch.LastWords(f)
	if len(words) == 0 {
		return lines
	}
	lines = append(lines, "  last words:")
	for _, w := range words {
		if w == "" {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, "    "+w)
	}
	return lines
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
