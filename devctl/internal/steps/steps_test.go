package steps

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// clock advances by the given durations, one per call, so every step takes a known time.
func clock(ticks ...time.Duration) func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		if len(ticks) > 0 {
			t = t.Add(ticks[0])
			ticks = ticks[1:]
		}
		return t
	}
}

func ok(context.Context) error { return nil }

func TestRunPrintsOneLineBeforeAndAfterEachStep(t *testing.T) {
	var out bytes.Buffer
	r := &Runner{Out: &out, Now: clock(0, 12340*time.Millisecond, 0, 80*time.Millisecond)}
	err := r.Run(context.Background(),
		Step{Name: "Building images", Run: ok},
		Step{Name: "Creating cluster mlkube", Run: func(context.Context) error {
			return Done("Cluster %s exists", "mlkube")
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := "• Building images ...\n" +
		"✓ Building images (12.3s)\n" +
		"• Creating cluster mlkube ...\n" +
		"✓ Cluster mlkube exists (0.1s)\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestRunStopsAtTheFirstFailure(t *testing.T) {
	var out bytes.Buffer
	boom := errors.New("boom")
	ranThird := false
	r := &Runner{Out: &out, Now: clock(0, time.Second, 0, 1200*time.Millisecond)}
	err := r.Run(context.Background(),
		Step{Name: "One", Run: ok},
		Step{Name: "Two", Run: func(context.Context) error { return boom }},
		Step{Name: "Three", Run: func(context.Context) error { ranThird = true; return nil }},
	)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the step's own error", err)
	}
	if ranThird {
		t.Error("the step after the failure ran")
	}
	want := "• One ...\n✓ One (1.0s)\n• Two ...\n✗ Two (1.2s)\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0s"},
		{40 * time.Millisecond, "0.0s"},
		{450 * time.Millisecond, "0.5s"},
		{12345 * time.Millisecond, "12.3s"},
		{59960 * time.Millisecond, "1m00s"},
		{125 * time.Second, "2m05s"},
		{61*time.Minute + 500*time.Millisecond, "61m01s"},
	} {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
