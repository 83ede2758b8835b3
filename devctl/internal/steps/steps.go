// Package steps runs a command as a list of named steps, one status line each, the way kind
// reports cluster creation:
//
//   - Building images ...
//     ✓ Building images (12.3s)
//
// A step may end with a line of its own: what it did, or that its work was already done
// ("✓ Cluster mlkube exists (0.1s)"). A failing step prints "✗ name (1.2s)" and stops the run;
// its error is returned, not printed: the command's caller prints it once.
package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// A Step is one unit of work with a name that reads as what is happening ("Building images").
type Step struct {
	Name string
	Run  func(ctx context.Context) error
}

// Runner prints the status lines of the steps it runs to Out.
type Runner struct {
	Out io.Writer
	// Now is the clock; nil means time.Now. Tests set it for stable durations.
	Now func() time.Time
}

// Run runs the steps in order and stops at the first failure, whose error it returns.
func (r *Runner) Run(ctx context.Context, steps ...Step) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	for _, s := range steps {
		fmt.Fprintf(r.Out, "• %s ...\n", s.Name)
		start := now()
		err := s.Run(ctx)
		took := Duration(now().Sub(start))
		var done *doneError
		switch {
		case err == nil:
			fmt.Fprintf(r.Out, "✓ %s (%s)\n", s.Name, took)
		case errors.As(err, &done):
			fmt.Fprintf(r.Out, "✓ %s (%s)\n", done.msg, took)
		default:
			fmt.Fprintf(r.Out, "✗ %s (%s)\n", s.Name, took)
			return err
		}
	}
	return nil
}

// Done ends a step successfully with a line that says what it did, or why there was nothing to
// do, in place of the step's name: return steps.Done("Cluster %s exists", name).
func Done(format string, args ...any) error {
	return &doneError{msg: fmt.Sprintf(format, args...)}
}

type doneError struct{ msg string }

func (e *doneError) Error() string { return e.msg }

// Duration formats d the way the status lines show it: "0.4s", "12.3s", "2m05s".
func Duration(d time.Duration) string {
	if d = d.Round(100 * time.Millisecond); d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
}
