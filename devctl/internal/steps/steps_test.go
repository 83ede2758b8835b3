package steps

import (
	"bytes"
	"context"
	"errors"
	"sync"
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

func ok(context.Context) (string, error) { return "", nil }

func TestRunPrintsOneLineBeforeAndAfterEachStep(t *testing.T) {
	var out bytes.Buffer
	r := &Runner{Out: &out, Now: clock(0, 12340*time.Millisecond, 0, 80*time.Millisecond)}
	err := r.Run(context.Background(),
		Step{Name: "Building images", Run: ok},
		Step{Name: "Creating cluster mlkube", Run: func(context.Context) (string, error) {
			return "Cluster mlkube exists", nil
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
		Step{Name: "Two", Run: func(context.Context) (string, error) { return "", boom }},
		Step{Name: "Three", Run: func(context.Context) (string, error) { ranThird = true; return "", nil }},
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

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// live is a Runner whose live progress draws once per tick the test sends.
func live(out *bytes.Buffer, c *fakeClock, terminal bool) (*Runner, func()) {
	tick := make(chan time.Time)
	drawn := make(chan struct{})
	r := &Runner{Out: out, Now: c.Now, Terminal: terminal, tick: tick, drawn: drawn}
	return r, func() { tick <- time.Time{}; <-drawn }
}

func TestTasksReportWhatTheyDoAndHowLongTheyTook(t *testing.T) {
	var out bytes.Buffer
	c := newFakeClock()
	r, draw := live(&out, c, false)
	err := r.Run(context.Background(), Step{Name: "Building images", Run: func(ctx context.Context) (string, error) {
		p := From(ctx)
		c.Advance(15 * time.Second)
		draw() // no task yet: the step itself
		op := p.Start("building mlkube/operator")
		probe := p.Start("building mlkube/nodeprobe")
		op.Doing("compiling k8s.io/client-go/kubernetes")
		c.Advance(2*time.Minute + 10*time.Second)
		draw()
		probe.Done("built %s", "mlkube/nodeprobe:0123456789ab")
		c.Advance(5 * time.Second)
		draw()
		op.Fail()
		op.Done("") // a second end is ignored
		p.Printf("version %s", "v1")
		return "Built two images", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `• Building images ...
  still building images (15.0s)
  • building mlkube/operator ...
  • building mlkube/nodeprobe ...
  still building mlkube/operator (2m10s): compiling k8s.io/client-go/kubernetes
  still building mlkube/nodeprobe (2m10s)
  ✓ built mlkube/nodeprobe:0123456789ab (2m10s)
  still building mlkube/operator (2m15s): compiling k8s.io/client-go/kubernetes
  ✗ building mlkube/operator (2m15s)
  version v1
✓ Built two images (2m30s)
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestOnATerminalTheSpinnerLineIsClearedBeforeEveryOtherLine(t *testing.T) {
	var out bytes.Buffer
	c := newFakeClock()
	r, draw := live(&out, c, true)
	err := r.Run(context.Background(),
		Step{Name: "Loading images", Run: func(ctx context.Context) (string, error) {
			c.Advance(time.Second)
			draw()
			task := From(ctx).Start("loading into node a")
			c.Advance(time.Second)
			draw()
			task.Done("")
			return "", nil
		}},
		Step{Name: "Creating cluster", OwnProgress: true, Run: func(ctx context.Context) (string, error) {
			// kind draws its own spinner: no tick is read, and nothing is drawn over it.
			c.Advance(time.Second)
			From(ctx).Printf("kind says hello")
			return "", nil
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	const clear = "\r\x1b[K"
	want := "• Loading images ...\n" +
		clear + "  ⠋ loading images (1.0s)" + clear + "  • loading into node a ...\n" +
		clear + "  ⠙ loading into node a (1.0s)" + clear + "  ✓ loading into node a (1.0s)\n" +
		"✓ Loading images (2.0s)\n" +
		"• Creating cluster ...\n  kind says hello\n✓ Creating cluster (1.0s)\n"
	if out.String() != want {
		t.Errorf("output:\n%q\nwant:\n%q", out.String(), want)
	}
}

func TestFromOutsideARunnerPrintsNothing(t *testing.T) {
	p := From(context.Background())
	task := p.Start("building")
	task.Doing("compiling")
	task.Done("built")
	p.Printf("hello")
}

// A step's name reads in the middle of a "still ..." line: its first letter lowered, unless it
// starts an acronym.
func TestLowerFirst(t *testing.T) {
	cases := [][2]string{
		{"Waiting for the operator", "waiting for the operator"},
		{"CRDs applied", "CRDs applied"},
		{"Ünicode", "ünicode"},
		{"", ""},
	}
	for _, c := range cases {
		if got := lowerFirst(c[0]); got != c[1] {
			t.Errorf("lowerFirst(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}
