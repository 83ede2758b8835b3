package follow

import (
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// A Line is one line of a replica's log, or a state line (State) to go between them.
type Line struct {
	Replica string
	// Time is when the container wrote it (the kubelet's timestamp), or when a state change was
	// seen; zero when unknown.
	Time time.Time
	Text string
	// State marks a state line: Text is written as it is, to StateOut.
	State bool
}

// A Merger interleaves the lines of several logs by the time they were written. Each stream
// delivers its lines in order but the streams race each other (a backlog arrives in bursts), so
// the Merger holds every line for Window after it arrives and writes the lines it holds
// oldest first: lines written within Window of each other come out in the order they were
// written, whichever stream brought them first.
type Merger struct {
	// Window is how long a line is held; zero writes each line as it comes, and Close sorts
	// whatever is still held (so a zero-window Merger that only Closes sorts everything).
	Window time.Duration
	Out    io.Writer
	Format func(Line) string
	// StateOut takes the state lines, in their place among the log lines; nil means Out.
	StateOut io.Writer
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	held    []heldLine
	seq     int
	lastOut time.Time
}

type heldLine struct {
	Line
	arrived time.Time
	seq     int
}

// Add takes a line as it arrives.
func (m *Merger) Add(l Line) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if l.Time.IsZero() {
		l.Time = now
	}
	m.seq++
	m.held = append(m.held, heldLine{Line: l, arrived: now, seq: m.seq})
}

// Flush writes, oldest first, the lines that have been held for Window. A line that is not due
// yet keeps every younger line back, so that it can still go first.
func (m *Merger) Flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush(false)
}

// Close writes every line still held, oldest first.
func (m *Merger) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush(true)
}

func (m *Merger) flush(all bool) {
	if len(m.held) == 0 {
		return
	}
	sort.SliceStable(m.held, func(i, j int) bool {
		a, b := m.held[i], m.held[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return a.seq < b.seq
	})
	due := m.now().Add(-m.Window)
	n := 0
	// Consecutive lines for the same writer go in one write.
	var out strings.Builder
	state := false
	write := func() {
		if out.Len() == 0 {
			return
		}
		w := m.Out
		if state && m.StateOut != nil {
			w = m.StateOut
		}
		io.WriteString(w, out.String())
		out.Reset()
	}
	for _, l := range m.held {
		if !all && l.arrived.After(due) {
			break
		}
		if l.State != state {
			write()
			state = l.State
		}
		if l.State {
			out.WriteString(l.Text)
		} else {
			out.WriteString(m.Format(l.Line))
		}
		n++
	}
	write()
	m.held = append(m.held[:0], m.held[n:]...)
}

func (m *Merger) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Run flushes every tick until stop is closed, then writes what is left.
func (m *Merger) Run(stop <-chan struct{}) {
	tick := m.Window / 4
	if tick <= 0 {
		tick = 50 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			m.Close()
			return
		case <-t.C:
			m.Flush()
		}
	}
}
