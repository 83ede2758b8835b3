package follow

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
	"k8s.io/client-go/kubernetes"
)

// A LogSource opens the log of a pod's container.
type LogSource interface {
	Open(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// KubeLogs reads logs through the apiserver from the kubelet (client-go's GetLogs).
type KubeLogs struct{ Kube kubernetes.Interface }

// Open streams the log; with opts.Follow, until the container exits.
func (k KubeLogs) Open(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return k.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
}

// A streamKey names one run of a container: the pod, and how many times the kubelet had
// restarted the container in place. A recreated pod (new UID) or a restarted container is a new
// run with a log of its own; each run's log is read once.
type streamKey struct {
	uid      types.UID
	restarts int32
}

// want tells which run of the pod's job container has a log to read now, and whether it
// is still being written (follow it) or finished.
func want(pod *corev1.Pod) (key streamKey, follow, ok bool) {
	cs := containerOf(pod)
	if cs == nil {
		return streamKey{}, false, false
	}
	key = streamKey{pod.UID, cs.RestartCount}
	switch {
	case cs.State.Running != nil:
		return key, true, true
	case cs.State.Terminated != nil:
		return key, false, true
	case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		// Waiting to be restarted in place: the log is still the last run's, numbered the same.
		return key, false, true
	}
	return streamKey{}, false, false
}

// streamEnd says a stream ended: cleanly (err nil: the container exited, or the log was read
// whole) or not, and the time of the last line it delivered.
type streamEnd struct {
	key     streamKey
	pod     *corev1.Pod
	replica string
	last    time.Time
	err     error
}

// readLog reads one log into the merger. Lines at or before since were delivered by an earlier
// stream of the same run, which broke; the kubelet's SinceTime has one-second steps, so it
// resends a little.
func readLog(ctx context.Context, src LogSource, pod *corev1.Pod, replica string, opts *corev1.PodLogOptions, since time.Time, m *Merger) (time.Time, error) {
	rc, err := src.Open(ctx, pod, opts)
	if err != nil {
		return since, err
	}
	defer rc.Close()
	last := since
	r := bufio.NewReaderSize(rc, 64*1024)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			t, text := SplitTimestamp(strings.TrimRight(line, "\r\n"))
			if t.IsZero() && opts.Timestamps {
				// The kubelet stamps every line the container wrote; one without a stamp is
				// the kubelet's own ("unable to retrieve container logs for ...").
				text = "[kubelet] " + text
			}
			if t.IsZero() || since.IsZero() || t.After(since) {
				m.Add(Line{Replica: replica, Time: t, Text: text})
				if !t.IsZero() {
					last = t
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return last, err
		}
	}
}

// logOptions are the options of a stream of the log of the pod's job container (tensorflow,
// mxnet).
func logOptions(pod *corev1.Pod, follow bool, since time.Time) *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{Container: containerName(pod), Follow: follow, Timestamps: true}
	if !since.IsZero() {
		t := metav1.NewTime(since)
		opts.SinceTime = &t
	}
	return opts
}

// gone says a log cannot be read any more: its pod or container is gone.
func gone(err error) bool {
	return apierrors.IsNotFound(err)
}

// ReadLog reads the whole log of the pod's job container (of its previous run, with
// previous: the one before the kubelet restarted it in place) into m, as replica's lines.
func ReadLog(ctx context.Context, src LogSource, pod *corev1.Pod, replica string, previous bool, m *Merger) error {
	opts := logOptions(pod, false, time.Time{})
	opts.Previous = previous
	_, err := readLog(ctx, src, pod, replica, opts, time.Time{}, m)
	return err
}

// HasLog says whether the pod's job container has run, and so has a log to read.
func HasLog(pod *corev1.Pod) bool {
	_, _, ok := want(pod)
	return ok
}
