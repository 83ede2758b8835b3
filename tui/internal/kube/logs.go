package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/jobwatch"
)

// LogRequest asks for the log of one container.
type LogRequest struct {
	Namespace string
	Pod       string
	Container string
	Previous  bool  // the container's previous instance, before its last restart
	Tail      int64 // lines from the end to start with
}

// DefaultTail is how many lines a log starts with.
const DefaultTail = 2000

// maxLine bounds one log line; the rest of a longer line is dropped.
const maxLine = 16 << 10

// StreamLogs streams a container's log (following it, unless it is the previous instance's)
// until ctx is done or the log ends. Lines arrive as LogLines with id, in chunks of what the
// apiserver has sent so far, and the end as LogEnded.
func (c *Client) StreamLogs(ctx context.Context, id int, req LogRequest) {
	go func() {
		err := c.streamLogs(ctx, id, req)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			err = fmt.Errorf("log of %s/%s: %w", req.Namespace, req.Pod, Explain(err, Access{Verbs: []string{"get"}, Resource: "pods/log", Namespace: req.Namespace}, c.cfg.Host))
		}
		c.feed.Send(LogEnded{Stream: id, Err: err})
	}()
}

func (c *Client) streamLogs(ctx context.Context, id int, req LogRequest) error {
	tail := req.Tail
	if tail == 0 {
		tail = DefaultTail
	}
	opts := &corev1.PodLogOptions{
		Container:  req.Container,
		Follow:     !req.Previous,
		Previous:   req.Previous,
		Timestamps: true, // always: the pane shows or hides them without asking again
		TailLines:  &tail,
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Pod}}
	_, err := jobwatch.Stream(ctx, jobwatch.KubeLogs{Pods: c.core}, pod, opts, time.Time{}, func(lines []jobwatch.Line) {
		c.feed.Send(LogLines{Stream: id, Lines: logLines(lines)})
	})
	return err
}

// logLines are the pane's lines of a chunk of a log. A line is cut at maxLine: the pane holds
// thousands.
func logLines(lines []jobwatch.Line) []LogLine {
	out := make([]LogLine, len(lines))
	for i, l := range lines {
		text := l.Text
		if len(text) > maxLine {
			text = text[:maxLine]
		}
		out[i] = LogLine{Time: l.Stamp, Text: text}
	}
	return out
}
