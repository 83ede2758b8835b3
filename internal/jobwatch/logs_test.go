package jobwatch

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseLine(t *testing.T) {
	for in, want := range map[string]Line{
		"2026-11-21T21:23:46.123456789Z step 100 loss=0.25\n": {Time: time.Date(2026, 11, 21, 21, 23, 46, 123456789, time.UTC), Stamp: "2026-11-21T21:23:46.123456789Z", Text: "step 100 loss=0.25"},
		"no timestamp here\r\n":                               {Text: "no timestamp here"},
		"2026-11-21T21:23:46Z ":                               {Time: time.Date(2026, 11, 21, 21, 23, 46, 0, time.UTC), Stamp: "2026-11-21T21:23:46Z"},
		"2026-11-21T21:23:46Z":                                {Time: time.Date(2026, 11, 21, 21, 23, 46, 0, time.UTC), Stamp: "2026-11-21T21:23:46Z"},
	} {
		if got := ParseLine(in); !got.Time.Equal(want.Time) || got.Stamp != want.Stamp || got.Text != want.Text {
			t.Errorf("ParseLine(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// Read hands over what has arrived whenever it would wait, not a line at a time.
func TestReadChunks(t *testing.T) {
	r, w := io.Pipe()
	chunks := make(chan []Line, 10)
	done := make(chan error, 1)
	go func() {
		_, err := Read(r, time.Time{}, func(l []Line) { chunks <- l })
		done <- err
	}()
	_, _ = io.WriteString(w, "2026-11-21T21:23:46Z a\n2026-11-21T21:23:46Z b\n2026-11-21T21:23:46Z c\n")
	if got := <-chunks; len(got) != 3 || got[2].Text != "c" {
		t.Fatalf("first chunk %+v, want the 3 lines written together", got)
	}
	_, _ = io.WriteString(w, "2026-11-21T21:23:47Z d\n")
	if got := <-chunks; len(got) != 1 || got[0].Text != "d" {
		t.Fatalf("second chunk %+v", got)
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatalf("Read at EOF: %v", err)
	}
}

// A stream opened again from its last line leaves out the lines the kubelet sends again (its
// SinceTime has one-second steps), but not the kubelet's own, unstamped, lines.
func TestReadSince(t *testing.T) {
	log := "2026-11-21T21:23:46.1Z a\n2026-11-21T21:23:46.2Z b\nkubelet says\n2026-11-21T21:23:46.3Z c\n"
	var got []string
	last, err := Read(strings.NewReader(log), time.Date(2026, 11, 21, 21, 23, 46, 2e8, time.UTC), func(l []Line) {
		for _, x := range l {
			got = append(got, x.Text)
		}
	})
	if err != nil || strings.Join(got, ",") != "kubelet says,c" || last.Nanosecond() != 3e8 {
		t.Errorf("Read since b: %v, last %v, %v", got, last, err)
	}
}

// brokenLogs serves a log that breaks after breaks[i] lines on its i-th opening; -1: its pod is
// gone. Follow opens one stream at a time, so it needs no lock.
type brokenLogs struct {
	lines  []string
	breaks []int
	opens  []corev1.PodLogOptions
}

func (b *brokenLogs) Open(_ context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	b.opens = append(b.opens, *opts)
	if len(b.breaks) == 0 {
		return io.NopCloser(strings.NewReader(strings.Join(b.lines, ""))), nil
	}
	n := b.breaks[0]
	b.breaks = b.breaks[1:]
	if n < 0 {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name)
	}
	return io.NopCloser(io.MultiReader(strings.NewReader(strings.Join(b.lines[:n], "")), reset{})), nil
}

type reset struct{}

func (reset) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func runningPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-worker-0", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
}

// Follow opens a broken stream again from its last line, as long as again lets it, and gives up
// after retries; the end of the log, or its pod gone, ends it without an error.
func TestFollowOpensABrokenStreamAgain(t *testing.T) {
	lines := []string{"2026-11-21T21:23:46.1Z a\n", "2026-11-21T21:23:47.2Z b\n", "2026-11-21T21:23:48.3Z c\n"}
	collect := func(b *brokenLogs, again func() (bool, bool)) (string, error) {
		var got []string
		err := Follow(context.Background(), b, runningPod(), true, again, func(l []Line) {
			for _, x := range l {
				got = append(got, x.Text)
			}
		})
		return strings.Join(got, ","), err
	}
	still := func() (bool, bool) { return true, true }
	defer func(p time.Duration) { pause = p }(pause)
	pause = time.Millisecond // the pauses' lengths are not what is tested

	b := &brokenLogs{lines: lines, breaks: []int{1, 2}}
	got, err := collect(b, still)
	if got != "a,b,c" || err != nil {
		t.Errorf("broken twice: %q, %v; want every line once", got, err)
	}
	// From the last line delivered: the kubelet takes whole seconds, Read leaves out the rest.
	for i, want := range []string{"", "2026-11-21T21:23:46Z", "2026-11-21T21:23:47Z"} {
		o := b.opens[i]
		since := ""
		if o.SinceTime != nil {
			since = o.SinceTime.UTC().Format(time.RFC3339)
		}
		if since != want || !o.Follow || !o.Timestamps || o.Container != "c" {
			t.Errorf("opening %d: %+v, want since %q", i, o, want)
		}
	}

	b = &brokenLogs{lines: lines, breaks: []int{1, -1}}
	if got, err := collect(b, still); got != "a" || err != nil {
		t.Errorf("pod gone: %q, %v; want what was read and no error", got, err)
	}

	b = &brokenLogs{lines: lines, breaks: []int{1}}
	if got, err := collect(b, func() (bool, bool) { return false, false }); got != "a" || err != nil || len(b.opens) != 1 {
		t.Errorf("run replaced: %q, %v, opened %d times; want no second opening", got, err, len(b.opens))
	}

	b = &brokenLogs{lines: lines, breaks: []int{0, 0, 0, 0, 0, 0}}
	if _, err := collect(b, still); err == nil || len(b.opens) != retries+1 {
		t.Errorf("broken for good: %v after %d openings; want the error after %d", err, len(b.opens), retries+1)
	}
}
