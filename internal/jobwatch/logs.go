package jobwatch

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// A LogSource opens the log of a pod's container. Tests, whose apiserver has no kubelet behind
// it, put a fake in place of KubeLogs.
type LogSource interface {
	Open(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// KubeLogs reads logs through the apiserver from the kubelet (the pods/log subresource).
type KubeLogs struct{ Pods corev1client.PodsGetter }

// Open streams the log; with opts.Follow, until the container exits.
func (k KubeLogs) Open(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return k.Pods.Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
}

// A Line is one line of a log read with timestamps (PodLogOptions.Timestamps).
type Line struct {
	// Time is the kubelet's timestamp, and Stamp that timestamp as the kubelet wrote it; both
	// are zero for a line without one: the kubelet's own ("unable to retrieve container logs
	// for ..."), as it stamps every line a container writes.
	Time  time.Time
	Stamp string
	Text  string
}

// ParseLine splits the kubelet's RFC 3339 timestamp from a line of a log read with timestamps.
func ParseLine(line string) Line {
	line = strings.TrimRight(line, "\r\n")
	stamp, text, ok := strings.Cut(line, " ")
	if !ok {
		stamp, text = line, ""
	}
	t, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return Line{Text: line}
	}
	return Line{Time: t, Stamp: stamp, Text: text}
}

// maxChunk bounds how many lines one call of Read's send takes.
const maxChunk = 512

// Read reads a log with timestamps and hands its lines to send, a chunk at a time: whatever has
// arrived when the reader would wait, or maxChunk lines, so a backlog costs few hand-overs and a
// live line is not held back. Lines stamped at or before since are left out: an earlier stream
// of the same log, which broke, delivered them, and the kubelet's SinceTime has one-second
// steps, so it sends them again. It returns the time of the last stamped line it handed over
// (since when none), and nil at the end of the log.
func Read(r io.Reader, since time.Time, send func([]Line)) (last time.Time, err error) {
	last = since
	br := bufio.NewReaderSize(r, 64<<10)
	var chunk []Line
	flush := func() {
		if len(chunk) > 0 {
			send(chunk)
			chunk = nil
		}
	}
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			l := ParseLine(s)
			if l.Time.IsZero() || since.IsZero() || l.Time.After(since) {
				chunk = append(chunk, l)
				if !l.Time.IsZero() {
					last = l.Time
				}
			}
		}
		if err != nil {
			flush()
			if errors.Is(err, io.EOF) {
				return last, nil
			}
			return last, err
		}
		if br.Buffered() == 0 || len(chunk) >= maxChunk {
			flush()
		}
	}
}

// Stream opens one log and reads it (Read) until it ends, breaks, or ctx is done.
func Stream(ctx context.Context, src LogSource, pod *corev1.Pod, opts *corev1.PodLogOptions, since time.Time, send func([]Line)) (time.Time, error) {
	rc, err := src.Open(ctx, pod, opts)
	if err != nil {
		return since, err
	}
	defer rc.Close()
	return Read(rc, since, send)
}

// Options are those of a stream of the log of the pod's Container, with timestamps; from since
// when it is not zero.
func Options(pod *corev1.Pod, follow bool, since time.Time) *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{Container: Container(pod), Follow: follow, Timestamps: true}
	if !since.IsZero() {
		t := metav1.NewTime(since)
		opts.SinceTime = &t
	}
	return opts
}

// retries is how many times Follow opens a broken stream again before it gives up; it waits
// pause before the first, twice that before the second, and so on.
const retries = 5

var pause = 500 * time.Millisecond

// Follow reads one run of the pod's Container's log (see Current) from its start, following it
// while it is written. A stream that breaks (not the end of the log, nor its pod or container
// gone) is opened again from its last line, after a pause that grows, up to retries times, as
// long as again says the run is still the pod's and whether it is still being written. It
// returns the error of the last try when it gives up; nil when the log ended, was gone, or
// ctx was done.
func Follow(ctx context.Context, src LogSource, pod *corev1.Pod, follow bool, again func() (follow, ok bool), send func([]Line)) error {
	var last time.Time
	for attempt := 1; ; attempt++ {
		var err error
		last, err = Stream(ctx, src, pod, Options(pod, follow, last), last, send)
		if err == nil || ctx.Err() != nil || Gone(err) {
			return nil
		}
		if attempt > retries {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt) * pause):
		case <-ctx.Done():
			return nil
		}
		var ok bool
		if follow, ok = again(); !ok {
			return nil
		}
	}
}

// Gone says a log cannot be read any more: its pod or container is gone.
func Gone(err error) bool {
	return apierrors.IsNotFound(err)
}

// A Run is one run of a pod's Container: the pod, and how many times the kubelet had restarted
// the container in place. A recreated pod (new UID) or a restarted container is a new run with
// a log of its own.
type Run struct {
	Pod      types.UID
	Restarts int32
}

// Current tells which run of the pod's Container has a log to read now, and whether it is still
// being written (live: follow it) or finished; ok is false while none has started.
func Current(pod *corev1.Pod) (run Run, live, ok bool) {
	cs := ContainerStatus(pod)
	if cs == nil {
		return Run{}, false, false
	}
	run = Run{pod.UID, cs.RestartCount}
	switch {
	case cs.State.Running != nil:
		return run, true, true
	case cs.State.Terminated != nil:
		return run, false, true
	case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		// Waiting to be restarted in place: the log is still the last run's, numbered the same.
		return run, false, true
	}
	return Run{}, false, false
}

// HasLog says whether the pod's Container has run, and so has a log to read.
func HasLog(pod *corev1.Pod) bool {
	_, _, ok := Current(pod)
	return ok
}
