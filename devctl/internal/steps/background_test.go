package steps

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// Work started in the background says what it does on the task that waits for it, what it said
// before the wait included; the wait gives its value, or fails the task with its error.
func TestBackgroundWorkShowsOnTheTaskThatWaits(t *testing.T) {
	var out bytes.Buffer
	c := newFakeClock()
	r, draw := live(&out, c, false)
	said, goOn := make(chan struct{}), make(chan struct{})
	build := Go(func(progress func(string)) (string, error) {
		progress("downloading modules")
		close(said)
		<-goOn
		progress("compiling")
		return "mlkube/kueue:v0.17.0-0123456789ab", nil
	})
	broken := Go(func(progress func(string)) (int, error) { return 0, errors.New("no Go") })
	<-said
	err := r.Run(context.Background(), Step{Name: "Readying Kueue", Run: func(ctx context.Context) (string, error) {
		task := From(ctx).Start("building Kueue's manager")
		go func() {
			for { // until the wait shows what the work said before it
				r.mu.Lock()
				doing := task.doing
				r.mu.Unlock()
				if doing != "" {
					break
				}
				time.Sleep(time.Millisecond)
			}
			c.Advance(time.Minute)
			draw()
			close(goOn)
		}()
		ref, err := build.Wait(task)
		if err != nil || ref != "mlkube/kueue:v0.17.0-0123456789ab" {
			t.Errorf("Wait: %q, %v", ref, err)
		}
		task.Done("%s", ref)
		if _, err := broken.Wait(From(ctx).Start("building the registry")); err == nil {
			t.Error("the broken work's error was lost")
		}
		return "", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `• Readying Kueue ...
  • building Kueue's manager ...
  still building Kueue's manager (1m00s): downloading modules
  ✓ mlkube/kueue:v0.17.0-0123456789ab (1m00s)
  • building the registry ...
  ✗ building the registry (0.0s)
✓ Readying Kueue (1m00s)
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// Work that no task shows is waited for in silence, as often as asked, and Done closes once it
// has ended, for a select beside a context.
func TestBackgroundWaitWithoutATask(t *testing.T) {
	goOn := make(chan struct{})
	b := Go(func(progress func(string)) (int, error) {
		progress("said to no one")
		<-goOn
		return 7, nil
	})
	select {
	case <-b.Done():
		t.Fatal("Done closed before the work ended")
	default:
	}
	close(goOn)
	<-b.Done()
	for range 2 {
		if v, err := b.Wait(nil); v != 7 || err != nil {
			t.Errorf("Wait(nil) = %d, %v; want 7, nil", v, err)
		}
	}
}
