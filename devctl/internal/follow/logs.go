package follow

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/internal/jobwatch"
)

// streamEnd says the stream of a run's log ended: err when it broke and jobwatch.Follow gave
// up on it, else nil.
type streamEnd struct {
	key     jobwatch.Run
	replica string
	err     error
}

// again asks the loop whether a broken stream of run's log is to be opened again.
type again struct {
	run   jobwatch.Run
	reply chan againReply
}

type againReply struct{ follow, ok bool }

// logLine is a line of replica's log as the Merger takes it. A line without the kubelet's
// timestamp is the kubelet's own ("unable to retrieve container logs for ..."), and says so.
func logLine(replica string, l jobwatch.Line) Line {
	text := l.Text
	if l.Time.IsZero() {
		text = "[kubelet] " + text
	}
	return Line{Replica: replica, Time: l.Time, Text: text}
}

// ReadLog reads the whole log of the pod's job container (of its previous run, with
// previous: the one before the kubelet restarted it in place) into m, as replica's lines.
func ReadLog(ctx context.Context, src jobwatch.LogSource, pod *corev1.Pod, replica string, previous bool, m *Merger) error {
	opts := jobwatch.Options(pod, false, time.Time{})
	opts.Previous = previous
	_, err := jobwatch.Stream(ctx, src, pod, opts, time.Time{}, func(lines []jobwatch.Line) {
		for _, l := range lines {
			m.Add(logLine(replica, l))
		}
	})
	return err
}
