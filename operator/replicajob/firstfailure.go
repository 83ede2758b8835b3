package replicajob

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// maxLastWords bounds the last words a job's status quotes: about 1 KiB of what the failed
// container printed last, cut at a line.
const maxLastWords = 1024

// settleFor is how long a job's permanent failure waits before it is judged, for the failures
// of the other ranks to come in: when one rank dies, its peers fail a moment later, and the
// kubelets of their nodes may report them first. Judged too soon, a peer's exit would be named.
const settleFor = 3 * time.Second

// settle is how long the job's first failure, finished at (on its node's clock; zero if not
// known), still waits: until settleFor after it finished, or after the engine first saw a
// failure of the job, whichever comes first (a node's clock may be ahead).
func (m *memory) settle(at, now time.Time) time.Duration {
	if m.failureSeen.IsZero() {
		m.failureSeen = now
	}
	end := m.failureSeen.Add(settleFor)
	if !at.IsZero() && at.Add(settleFor).Before(end) {
		end = at.Add(settleFor)
	}
	return max(end.Sub(now), 0)
}

// firstFailed is the replica whose permanent failure fails the job: the one that failed first.
// When one rank dies, its peers often fail after it because it is gone; the kubelet's
// finishedAt (to the second) orders them, and replica order breaks a tie.
func firstFailed(replicas []*replica, container string, live func(*replica) bool) *replica {
	var first *replica
	var firstAt time.Time
	for _, r := range replicas {
		if !live(r) || r.verdict.Outcome != Permanent {
			continue
		}
		at := finishedAt(r, container)
		// A failure with no time (a pod failed as a whole) goes after those with one.
		if first == nil || !at.IsZero() && (firstAt.IsZero() || at.Before(firstAt)) {
			first, firstAt = r, at
		}
	}
	return first
}

// terminationOf is the container's last termination in r's pod; nil when it has none.
func terminationOf(r *replica, container string) *corev1.ContainerStateTerminated {
	for _, cs := range r.pod.Status.ContainerStatuses {
		if cs.Name == container {
			return cs.State.Terminated
		}
	}
	return nil
}

func finishedAt(r *replica, container string) time.Time {
	if term := terminationOf(r, container); term != nil {
		return term.FinishedAt.Time
	}
	return time.Time{}
}

// failureOf is what status.firstFailure says of r.
func failureOf(r *replica, container string) *v1beta1.ReplicaFailure {
	f := &v1beta1.ReplicaFailure{
		Replica: fmt.Sprintf("%s %d", strings.ToLower(r.group.Type), r.index),
		Pod:     r.pod.Name,
		Node:    r.pod.Spec.NodeName,
		Reason:  r.verdict.Reason,
		Judged:  r.verdict.Class(),
	}
	if r.verdict.HasExit {
		f.ExitCode = &r.verdict.ExitCode
	}
	if term := terminationOf(r, container); term != nil {
		if !term.FinishedAt.IsZero() {
			f.FinishedAt = &term.FinishedAt
		}
		f.LastWords = lastWords(term.Message, maxLastWords)
	}
	return f
}

// failureMessage is the Failed condition's message: which replica failed first, where, how, and
// the last line it printed.
func failureMessage(r *replica, f *v1beta1.ReplicaFailure) string {
	msg := f.Replica + " failed first: " + r.verdict.Describe(r.name)
	if f.Node != "" {
		msg += " on node " + f.Node
	}
	msg += ": the job failed"
	if line := lastLine(f.LastWords); line != "" {
		msg += fmt.Sprintf("; its last words: %q", line)
	}
	return msg
}

// lastWords is the end of text, at most limit bytes, starting at a line where it is cut, and
// marked "[...]" there.
func lastWords(text string, limit int) string {
	text = strings.TrimRight(text, " \t\r\n")
	if len(text) <= limit {
		return text
	}
	const mark = "[...]\n"
	tail := text[len(text)-(limit-len(mark)):]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		return mark + tail[i+1:]
	}
	// One line longer than the limit: cut it where a character starts.
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return "[...]" + tail
}

// lastLine is the last line of text that says something, at most 200 bytes.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimRight(text, " \t\r\n"), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if len(line) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "..."
	}
	return line
}
