package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	rc, err := c.core.Pods(req.Namespace).GetLogs(req.Pod, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	return ReadLog(rc, func(lines []LogLine) { c.feed.Send(LogLines{Stream: id, Lines: lines}) })
}

// ReadLog reads a log with timestamps and hands its lines to send, a chunk at a time: whatever
// has arrived when the reader would wait, or 512 lines.
func ReadLog(r io.Reader, send func([]LogLine)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var chunk []LogLine
	flush := func() {
		if len(chunk) > 0 {
			send(chunk)
			chunk = nil
		}
	}
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			chunk = append(chunk, ParseLogLine(line))
		}
		if err != nil {
			flush()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if br.Buffered() == 0 || len(chunk) >= 512 {
			flush()
		}
	}
}

// ParseLogLine splits the kubelet's timestamp from a line of a log read with timestamps.
func ParseLogLine(line string) LogLine {
	line = strings.TrimRight(line, "\r\n")
	if len(line) > maxLine {
		line = line[:maxLine]
	}
	if ts, text, ok := strings.Cut(line, " "); ok {
		if _, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return LogLine{Time: ts, Text: text}
		}
	}
	return LogLine{Text: line}
}
