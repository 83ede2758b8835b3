package follow

import (
	"strings"
	"testing"
	"time"
)

// The Merger puts lines that raced each other back in the order they were written, and holds
// none longer than its window.
func TestMergerInterleavesByTime(t *testing.T) {
	var out strings.Builder
	now := time.Unix(100, 0)
	p := NewPrinter(nil, false, false)
	p.width = 8
	m := &Merger{Window: 200 * time.Millisecond, Out: &out, Now: func() time.Time { return now },
		Format: func(l Line) string { return p.LogLine(l.Replica, l.Text) }}
	at := func(ms int) time.Time { return time.Unix(50, 0).Add(time.Duration(ms) * time.Millisecond) }

	// worker-0's backlog arrives first, then master-0's, though they interleave in time.
	m.Add(Line{Replica: "worker-0", Time: at(10), Text: "w 1"})
	m.Add(Line{Replica: "worker-0", Time: at(30), Text: "w 2"})
	now = now.Add(50 * time.Millisecond)
	m.Add(Line{Replica: "master-0", Time: at(20), Text: "m 1"})
	m.Add(Line{Replica: "master-0", Time: at(40), Text: "m 2"})
	m.Flush()
	if out.Len() != 0 {
		t.Fatalf("lines written before their window passed: %q", out.String())
	}
	now = now.Add(160 * time.Millisecond) // worker-0's lines are due, master-0's not yet
	m.Flush()
	if got, want := out.String(), "worker-0 | w 1\n"; got != want {
		t.Errorf("after the first window:\n%q, want %q (m 1 is older than w 2 and not due)", got, want)
	}
	now = now.Add(50 * time.Millisecond)
	m.Flush()
	m.Add(Line{Replica: "ps-0", Text: "no timestamp: takes its arrival"})
	m.Close()
	want := "worker-0 | w 1\nmaster-0 | m 1\nworker-0 | w 2\nmaster-0 | m 2\nps-0     | no timestamp: takes its arrival\n"
	if out.String() != want {
		t.Errorf("merged:\n%s\nwant:\n%s", out.String(), want)
	}
}

// Lines of one replica with equal timestamps keep the order they came in.
func TestMergerKeepsOrderOfEqualTimes(t *testing.T) {
	var out strings.Builder
	m := &Merger{Out: &out, Format: func(l Line) string { return l.Text + "\n" }}
	ts := time.Unix(1, 0)
	for _, s := range []string{"a", "b", "c", "d"} {
		m.Add(Line{Replica: "x", Time: ts, Text: s})
	}
	m.Close()
	if out.String() != "a\nb\nc\nd\n" {
		t.Errorf("got %q", out.String())
	}
}

// State lines take their place among the log lines by time, and go to their own writer.
func TestMergerPutsStateLinesInTheirPlace(t *testing.T) {
	var all, logs, states strings.Builder
	tee := func(b *strings.Builder) *teeWriter { return &teeWriter{b, &all} }
	m := &Merger{Out: tee(&logs), StateOut: tee(&states), Format: func(l Line) string { return l.Replica + " | " + l.Text + "\n" }}
	t0 := time.Unix(100, 0)
	m.Add(Line{Replica: "master-0", Time: t0, Text: "converged"})
	m.Add(Line{Time: t0.Add(30 * time.Millisecond), Text: "master-0  Running -> Succeeded (exit code 0)\n", State: true})
	m.Add(Line{Replica: "worker-0", Time: t0.Add(10 * time.Millisecond), Text: "done, exiting 0"})
	m.Close()
	if want := "master-0 | converged\nworker-0 | done, exiting 0\nmaster-0  Running -> Succeeded (exit code 0)\n"; all.String() != want {
		t.Errorf("merged:\n%s\nwant:\n%s", all.String(), want)
	}
	if states.String() != "master-0  Running -> Succeeded (exit code 0)\n" || strings.Contains(logs.String(), "Succeeded") {
		t.Errorf("state lines went to the wrong writer: logs %q, states %q", logs.String(), states.String())
	}
}

type teeWriter struct{ a, b *strings.Builder }

func (w *teeWriter) Write(p []byte) (int, error) {
	w.a.Write(p)
	return w.b.Write(p)
}
