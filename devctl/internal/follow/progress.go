package follow

import (
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// DefaultProgressEvery is the least time between two progress lines of a log (not a terminal):
// a run of hours reporting every second would otherwise bury its logs under them.
const DefaultProgressEvery = 10 * time.Second

// ProgressLine is the trainers' progress in one line: "progress  step 120/1000 (12%)  ~3m20s
// left  loss 0.4213", where they are, the time left and the first metric they reported, then
// "stalled" while the Progressing condition says so. "" when they never reported.
func ProgressLine(status *v1beta1.JobStatus) string {
	p := status.Progress
	if p == nil {
		return ""
	}
	words := jobwatch.ProgressWords(p)
	if metrics := jobwatch.MetricWords(p); len(metrics) > 0 {
		words = append(words, metrics[0])
	}
	if stalled(status) {
		words = append(words, "stalled")
	}
	return "progress  " + strings.Join(words, "  ")
}

func stalled(status *v1beta1.JobStatus) bool {
	for _, c := range status.Conditions {
		if jobwatch.Stalled(c.Type, string(c.Status), c.Reason) {
			return true
		}
	}
	return false
}

// clearLine takes the cursor to the start of its line and erases the line.
const clearLine = "\r\x1b[2K"

// A LiveLine is one line kept at the bottom of a terminal, below everything else written there:
// devctl run's progress. Every write through Writer clears it first and draws it again after,
// so the lines written meanwhile go above it. It is cut to the terminal's width: a line that
// wraps would leave its first part behind when cleared.
type LiveLine struct {
	term io.Writer
	mu   sync.Mutex
	text string // the line; "" when there is none
	// paused counts the Pauses not yet resumed: the line is off the screen meanwhile.
	paused int
}

// NewLiveLine keeps a line at the bottom of term.
func NewLiveLine(term io.Writer) *LiveLine { return &LiveLine{term: term} }

// Writer is w with its writes going above the line: w is term, or another writer to the same
// screen (stdout beside stderr). Each write must end a line.
func (l *LiveLine) Writer(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.clearLocked()
		n, err := w.Write(p)
		l.drawLocked()
		return n, err
	})
}

// Pause takes the line off the screen until resume puts it back, for another line drawn in place
// meanwhile (a step's spinner, devctl up's): changes meanwhile are kept, and drawn on resume.
func (l *LiveLine) Pause() (resume func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
	l.paused++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.paused--
			l.drawLocked()
		})
	}
}

// Set draws text in place of the line drawn before; "" takes the line away.
func (l *LiveLine) Set(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if text == l.text {
		return
	}
	l.clearLocked()
	l.text = text
	l.drawLocked()
}

// Keep leaves the line on screen as a line of its own, where it is: the last word of the run
// it showed. The next Set starts a new line below it.
func (l *LiveLine) Keep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.text != "" && l.paused == 0 {
		io.WriteString(l.term, "\n")
	}
	l.text = ""
}

func (l *LiveLine) clearLocked() {
	if l.text != "" && l.paused == 0 {
		io.WriteString(l.term, clearLine)
	}
}

func (l *LiveLine) drawLocked() {
	if l.text != "" && l.paused == 0 {
		io.WriteString(l.term, ansi.Truncate(l.text, steps.Width(l.term)-1, "…"))
	}
}

// progressLines picks the progress lines a log gets where no line can be redrawn (a file, a
// pipe, CI): a line when the progress changed, at most one per every, and at the end the last
// change if it had to wait, so that the log ends with where training got.
type progressLines struct {
	every   time.Duration
	said    string
	saidAt  time.Time
	pending string // a change that waits for its turn
}

// offer takes the line as it is at now and says what to print now ("" for nothing) and, for a
// change that must wait its turn, how long until offering it again prints it.
func (p *progressLines) offer(line string, now time.Time) (string, time.Duration) {
	if line == "" || line == p.said {
		p.pending = ""
		return "", 0
	}
	if wait := p.saidAt.Add(p.every).Sub(now); p.said != "" && wait > 0 {
		p.pending = line
		return "", wait
	}
	p.said, p.saidAt, p.pending = line, now, ""
	return line, 0
}

// last is the change that still waits, at the end: it is said now whatever the time.
func (p *progressLines) last() string {
	line := p.pending
	p.pending = ""
	if line != "" {
		p.said = line
	}
	return line
}
