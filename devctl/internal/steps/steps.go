// Package steps runs a command as a list of named steps, one status line each, the way kind
// reports cluster creation:
//
//	$ devctl up
//	• Building images ...
//	✓ Building images (12.3s)
//
// A step may end with a line of its own, which its Run returns: what it did, or that its work
// was already done ("✓ Cluster mlkube exists (0.1s)"). A failing step prints "✗ name (1.2s)" and
// stops the run; its error is returned, not printed: the command's caller prints it once.
//
// While a step runs, the Runner shows that it is still at work and for how long: on a terminal a
// spinner line redrawn in place, elsewhere (a log, CI) a "still ..." line every Every. A step
// tells more through its Progress (From): the tasks it runs, each with a start line, what it is
// doing now, and an end line with its duration:
//
//	$ devctl up
//	• Building images ...
//	  • building mlkube/operator ...
//	  still building mlkube/operator (15.0s): compiling k8s.io/client-go/kubernetes
//	  ✓ built mlkube/operator:0123456789ab (41.0s)
//	✓ Built mlkube/operator:0123456789ab (41.2s)
package steps

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"golang.org/x/term"
)

// A Step is one unit of work with a name that reads as what is happening ("Building images").
type Step struct {
	Name string
	// Run does the work. On success (a nil error) it returns the line the step ends with in
	// place of its name, what it did or why there was nothing to do ("Cluster mlkube exists"),
	// or "" to end with the name.
	Run func(ctx context.Context) (string, error)
	// OwnProgress says the step draws its own live progress on a terminal (kind's spinner): the
	// Runner draws none there while it runs. Elsewhere the Runner's periodic lines still show.
	OwnProgress bool
}

// DefaultEvery is how often a Runner that is not on a terminal says what is still running.
const DefaultEvery = 15 * time.Second

// Runner prints the status lines of the steps it runs to Out.
type Runner struct {
	Out io.Writer
	// Now is the clock; nil means time.Now. Tests set it for stable durations.
	Now func() time.Time
	// Terminal says Out is a terminal: live progress is a spinner line redrawn in place.
	// Otherwise it is a "still ..." line per running task every Every.
	Terminal bool
	// Every is the period of the "still ..." lines; zero means DefaultEvery.
	Every time.Duration

	// tick, when set (tests), replaces the clock that drives live progress; drawn, when set,
	// hears when a tick's drawing is done.
	tick  <-chan time.Time
	drawn chan<- struct{}

	mu sync.Mutex
	// spinning says a spinner line is on screen, to be cleared before the next line.
	spinning bool
}

// IsTerminal says whether w is a terminal that can redraw a line in place: a character device,
// and TERM is not dumb.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (r *Runner) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// Run runs the steps in order and stops at the first failure, whose error it returns.
func (r *Runner) Run(ctx context.Context, steps ...Step) error {
	for _, s := range steps {
		r.println("• " + s.Name + " ...")
		p := &Progress{r: r, step: s.Name, start: r.now()}
		stop := r.live(p, s.OwnProgress)
		said, err := s.Run(context.WithValue(ctx, progressKey{}, p))
		stop()
		took := Duration(r.now().Sub(p.start))
		if err != nil {
			r.println(fmt.Sprintf("✗ %s (%s)", s.Name, took))
			return err
		}
		if said == "" {
			said = s.Name
		}
		r.println(fmt.Sprintf("✓ %s (%s)", said, took))
	}
	return nil
}

// live shows p's progress until the returned func is called, which returns once nothing more
// will be drawn.
func (r *Runner) live(p *Progress, own bool) (stop func()) {
	period := r.Every
	if period <= 0 {
		period = DefaultEvery
	}
	spin := r.Terminal
	if spin {
		if own {
			return func() {}
		}
		period = 100 * time.Millisecond
	}
	ticks := r.tick
	var ticker *time.Ticker
	if ticks == nil {
		ticker = time.NewTicker(period)
		ticks = ticker.C
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		frame := 0
		for {
			select {
			case <-quit:
				return
			case <-ticks:
			}
			if spin {
				r.spin(p, frame)
				frame++
			} else {
				r.still(p)
			}
			if r.drawn != nil {
				r.drawn <- struct{}{}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		if ticker != nil {
			ticker.Stop()
		}
		r.mu.Lock()
		r.clearLocked()
		r.mu.Unlock()
	}
}

// still prints one "still ..." line for each running task of p, or for the step when none runs.
func (r *Runner) still(p *Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if len(p.tasks) == 0 {
		fmt.Fprintf(r.Out, "  still %s (%s)\n", lowerFirst(p.step), Duration(now.Sub(p.start)))
		return
	}
	for _, t := range p.tasks {
		fmt.Fprintf(r.Out, "  still %s\n", t.statusLocked(now))
	}
}

var frames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// spin redraws the spinner line: the running tasks, or the step, with their elapsed time, cut
// to the terminal's width so that it never wraps.
func (r *Runner) spin(p *Progress, frame int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var parts []string
	for _, t := range p.tasks {
		parts = append(parts, t.statusLocked(now))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%s (%s)", lowerFirst(p.step), Duration(now.Sub(p.start))))
	}
	line := "  " + frames[frame%len(frames)] + " " + strings.Join(parts, " · ")
	fmt.Fprint(r.Out, "\r\x1b[K"+ansi.Truncate(line, Width(r.Out)-1, "…"))
	r.spinning = true
}

// Width is how many columns the terminal w writes to has; 80 when w is none or will not say.
// A line redrawn in place must be cut to it: one that wraps leaves its first part behind.
func Width(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// clearLocked erases the spinner line, if one is drawn.
func (r *Runner) clearLocked() {
	if r.spinning {
		fmt.Fprint(r.Out, "\r\x1b[K")
		r.spinning = false
	}
}

// println prints a status line, under the spinner's.
func (r *Runner) println(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearLocked()
	fmt.Fprintln(r.Out, line)
}

type progressKey struct{}

// Progress is what a running step tells of its work: lines of its own, and tasks that the live
// progress shows while they run. Its methods may be called from several goroutines at once.
type Progress struct {
	r     *Runner
	step  string
	start time.Time
	tasks []*Task
}

// From returns the Progress of the step that ctx was given to; outside a Runner, one that
// prints nothing.
func From(ctx context.Context) *Progress {
	if p, ok := ctx.Value(progressKey{}).(*Progress); ok {
		return p
	}
	return &Progress{r: &Runner{Out: io.Discard}}
}

// Printf prints a line of the step's own, indented under its status line.
func (p *Progress) Printf(format string, args ...any) {
	p.r.println("  " + fmt.Sprintf(format, args...))
}

// Start begins a task of the step: it prints "  • what ...", and the live progress shows the
// task with its elapsed time until it ends with Done or Fail. what reads as what is happening:
// "building mlkube/operator".
func (p *Progress) Start(what string) *Task {
	t := &Task{p: p, what: what, start: p.r.now()}
	p.r.mu.Lock()
	p.tasks = append(p.tasks, t)
	p.r.clearLocked()
	fmt.Fprintf(p.r.Out, "  • %s ...\n", what)
	p.r.mu.Unlock()
	return t
}

// A Task is one piece of a step's work, in its Progress.
type Task struct {
	p     *Progress
	what  string
	start time.Time
	doing string
	ended bool
}

// Doing says what the task does right now ("compiling k8s.io/client-go/kubernetes"): the live
// progress shows it after the task's elapsed time.
func (t *Task) Doing(now string) {
	t.p.r.mu.Lock()
	t.doing = now
	t.p.r.mu.Unlock()
}

// Done ends the task with "  ✓ <what it did> (duration)"; an empty format prints the task's own
// description.
func (t *Task) Done(format string, args ...any) {
	msg := t.what
	if format != "" {
		msg = fmt.Sprintf(format, args...)
	}
	t.end("✓ " + msg)
}

// Fail ends the task with "  ✗ what (duration)"; the step's error tells why.
func (t *Task) Fail() { t.end("✗ " + t.what) }

func (t *Task) end(msg string) {
	r := t.p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.ended {
		return
	}
	t.ended = true
	for i, other := range t.p.tasks {
		if other == t {
			t.p.tasks = append(t.p.tasks[:i], t.p.tasks[i+1:]...)
			break
		}
	}
	r.clearLocked()
	fmt.Fprintf(r.Out, "  %s (%s)\n", msg, Duration(r.now().Sub(t.start)))
}

// statusLocked is the task as the live progress shows it: "building x (2m10s): compiling y".
func (t *Task) statusLocked(now time.Time) string {
	s := fmt.Sprintf("%s (%s)", t.what, Duration(now.Sub(t.start)))
	if t.doing != "" {
		s += ": " + t.doing
	}
	return s
}

// lowerFirst turns a step name into the middle of a sentence: "Waiting for x" → "waiting for
// x", leaving acronyms ("CRDs ...") alone.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	first, size := utf8.DecodeRuneInString(s)
	second, _ := utf8.DecodeRuneInString(s[size:])
	if unicode.IsUpper(second) {
		return s
	}
	return string(unicode.ToLower(first)) + s[size:]
}

// OneLine is the first line of err, for a status line: the rest (a compiler's output, a
// diagnosis) belongs in the error the command ends with.
func OneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Duration formats d the way the status lines show it: "0.4s", "12.3s", "2m05s".
func Duration(d time.Duration) string {
	if d = d.Round(100 * time.Millisecond); d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
}
