package follow

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func int64p(v int64) *int64 { return &v }
func int32p(v int32) *int32 { return &v }

// progress is a report of step of 100, with a loss.
func progress(step int64, loss string) *v1beta1.JobProgress {
	return &v1beta1.JobProgress{Step: step, TotalSteps: int64p(100), Percent: int32p(int32(step)), Remaining: "3m20s",
		Metrics: []v1beta1.Metric{{Name: "loss", Value: loss}, {Name: "accuracy", Value: "0.91"}}, Replica: "j-worker-0",
		ReportTime: metav1.Now()}
}

var stalledCondition = metav1.Condition{Type: v1beta1.JobProgressing, Status: metav1.ConditionFalse, Reason: jobwatch.ReasonStalled,
	Message: "no larger step for 60s (progressDeadlineSeconds): restarting every replica", LastTransitionTime: metav1.Now()}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status v1beta1.JobStatus
		want   string
	}{
		{"no report", v1beta1.JobStatus{State: v1beta1.JobStateRunning}, ""},
		{"a report", v1beta1.JobStatus{Progress: progress(12, "0.4213")}, "progress  step 12/100 (12%)  ~3m20s left  loss 0.4213"},
		{"a step alone", v1beta1.JobStatus{Progress: &v1beta1.JobProgress{Step: 7}}, "progress  step 7"},
		{"stalled", v1beta1.JobStatus{Progress: progress(12, "0.4213"), Conditions: []metav1.Condition{stalledCondition}},
			"progress  step 12/100 (12%)  ~3m20s left  loss 0.4213  stalled"},
	} {
		if got := ProgressLine(&tc.status); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// screenOf is what a terminal shows after s: each "\r\x1b[2K" erases the line the cursor is on.
func screenOf(s string) string {
	var done []string
	cur := ""
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, clearLine):
			cur, s = "", s[len(clearLine):]
		case s[0] == '\n':
			done, cur, s = append(done, cur), "", s[1:]
		default:
			cur, s = cur+s[:1], s[1:]
		}
	}
	return strings.Join(append(done, cur), "\n")
}

// On a terminal the progress is one line under everything else: each line written above it
// clears it and draws it again; a change redraws it in place; kept, it stays as the last line.
func TestLiveLineStaysAtTheBottom(t *testing.T) {
	var term strings.Builder
	l := NewLiveLine(&term)
	w := l.Writer(&term)
	io.WriteString(w, "created tfjob/j\n")
	l.Set("progress  step 1")
	io.WriteString(w, "worker-0 | hello\n")
	l.Set("progress  step 2")
	l.Set("progress  step 2") // no change: nothing drawn
	io.WriteString(w, "tfjob     state Running -> Succeeded\n")
	l.Keep()
	io.WriteString(w, "tfjob/j Succeeded in 3s\n")

	want := "created tfjob/j\n" + "progress  step 1" +
		clearLine + "worker-0 | hello\n" + "progress  step 1" +
		clearLine + "progress  step 2" +
		clearLine + "tfjob     state Running -> Succeeded\n" + "progress  step 2" +
		"\n" + "tfjob/j Succeeded in 3s\n"
	if term.String() != want {
		t.Errorf("wrote\n%q\nwant\n%q", term.String(), want)
	}
	screen := "created tfjob/j\nworker-0 | hello\ntfjob     state Running -> Succeeded\nprogress  step 2\ntfjob/j Succeeded in 3s\n"
	if got := screenOf(term.String()); got != screen {
		t.Errorf("screen:\n%s\nwant:\n%s", got, screen)
	}

	// A line wider than the terminal would wrap, and clearing would leave its first part.
	term.Reset()
	l = NewLiveLine(&term)
	l.Set(strings.Repeat("x", 200))
	if got := term.String(); got != strings.Repeat("x", 78)+"…" {
		t.Errorf("a long line drawn as %q", got)
	}
}

// Another line drawn in place (a step's spinner) pauses the progress line: it leaves the screen,
// changes meanwhile are drawn when it comes back.
func TestLiveLinePauses(t *testing.T) {
	var term strings.Builder
	l := NewLiveLine(&term)
	w := l.Writer(&term)
	l.Set("progress  step 1")
	resume := l.Pause()
	io.WriteString(w, "\r\x1b[K  ⠋ loading (1s)")
	l.Set("progress  step 2")
	io.WriteString(w, "\r\x1b[K✓ Loaded\n")
	resume()
	resume() // once only
	want := "progress  step 1" + clearLine + "\r\x1b[K  ⠋ loading (1s)" + "\r\x1b[K✓ Loaded\n" + "progress  step 2"
	if term.String() != want {
		t.Errorf("wrote\n%q\nwant\n%q", term.String(), want)
	}
}

// In a log the progress is a line when it changes, at most one per period, and the change that
// waited is said when its turn comes, or at the end.
func TestProgressLinesAtMostOnePerPeriod(t *testing.T) {
	p := progressLines{every: 10 * time.Second}
	t0 := time.Now()
	step := func(d time.Duration, line, wantSay string, wantWait time.Duration) {
		t.Helper()
		if say, wait := p.offer(line, t0.Add(d)); say != wantSay || wait != wantWait {
			t.Errorf("at %s, %q: said %q, wait %s; want %q, %s", d, line, say, wait, wantSay, wantWait)
		}
	}
	step(0, "", "", 0) // no report yet
	step(0, "step 1", "step 1", 0)
	step(time.Second, "step 1", "", 0)
	step(2*time.Second, "step 2", "", 8*time.Second)
	step(3*time.Second, "step 3", "", 7*time.Second)
	step(10*time.Second, p.pending, "step 3", 0)
	step(25*time.Second, "step 4", "step 4", 0)
	if last := p.last(); last != "" {
		t.Errorf("nothing waits, yet the last is %q", last)
	}
	step(26*time.Second, "step 5", "", 9*time.Second)
	if last := p.last(); last != "step 5" {
		t.Errorf("the last change is %q, want step 5", last)
	}
}

// Following a job whose trainers report, into a log: the first report at once, changes at most
// once per ProgressEvery, and the last report at the end, stalled; the stall's condition is said
// with its message.
func TestFollowSaysTheProgressInALog(t *testing.T) {
	ns := namespace(t) // no operator: the test writes the job's status
	ctx := context.Background()
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reports"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{group(v1beta1.TfReplicaWorker, 1)}}}
	must(t, k8s.Create(ctx, job))
	setJobStatus(t, job, v1beta1.JobStatus{Phase: v1beta1.JobPhaseRunning, State: v1beta1.JobStateRunning, Progress: progress(10, "0.9")})

	var status syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true,
			States: true, Status: &status, Window: 10 * time.Millisecond, Drain: time.Second, ProgressEvery: time.Hour})
		done <- err
	}()
	first := "tfjob     progress  step 10/100 (10%)  ~3m20s left  loss 0.9\n"
	eventually(t, "the first report said", func() error {
		if !strings.Contains(status.String(), first) {
			return errors.New("not yet")
		}
		return nil
	})
	for _, step := range []int64{20, 30} {
		setJobStatus(t, job, v1beta1.JobStatus{Phase: v1beta1.JobPhaseRunning, State: v1beta1.JobStateRunning, Progress: progress(step, "0.5")})
	}
	setJobStatus(t, job, v1beta1.JobStatus{Phase: v1beta1.JobPhaseFailed, State: v1beta1.JobStateFailed, Progress: progress(40, "0.4"),
		Conditions: []metav1.Condition{stalledCondition}})
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Follow did not return after the job failed:\n%s", status.String())
	}
	got := status.String()
	t.Logf("status:\n%s", got)
	inOrder(t, got, first,
		"tfjob     Progressing=False (ProgressDeadlineExceeded): no larger step for 60s (progressDeadlineSeconds): restarting every replica\n",
		"tfjob     progress  step 40/100 (40%)  ~3m20s left  loss 0.4  stalled\n")
	for _, skipped := range []string{"step 20/", "step 30/"} {
		if strings.Contains(got, skipped) {
			t.Errorf("%s said within ProgressEvery of the first report", skipped)
		}
	}
	if !strings.HasSuffix(got, "stalled\n") {
		t.Error("the last report is not the last line")
	}
}

// Following on a terminal: the progress is drawn in place and kept as the last line at the end.
func TestFollowDrawsTheProgressInPlace(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"}, Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{group(v1beta1.TfReplicaWorker, 1)}}}
	must(t, k8s.Create(ctx, job))
	setJobStatus(t, job, v1beta1.JobStatus{Phase: v1beta1.JobPhaseRunning, State: v1beta1.JobStateRunning, Progress: progress(10, "0.9")})

	var term syncBuffer
	live := NewLiveLine(&term)
	done := make(chan error, 1)
	go func() {
		_, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: job, MatchUID: true,
			States: true, Status: live.Writer(&term), Out: live.Writer(&term), Live: live, Window: 10 * time.Millisecond, Drain: time.Second})
		done <- err
	}()
	eventually(t, "the first report drawn", func() error {
		if !strings.Contains(term.String(), "step 10/100") {
			return errors.New("not yet")
		}
		return nil
	})
	setJobStatus(t, job, v1beta1.JobStatus{Phase: v1beta1.JobPhaseRunning, State: v1beta1.JobStateRunning, Progress: progress(20, "0.5")})
	setJobStatus(t, job, v1beta1.JobStatus{Phase: v1beta1.JobPhaseDone, State: v1beta1.JobStateSucceeded, Progress: progress(100, "0.1")})
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Follow did not return after the job succeeded:\n%q", term.String())
	}
	screen := screenOf(term.String())
	t.Logf("screen:\n%s", screen)
	if strings.Contains(screen, "step 10/100") || strings.Contains(screen, "step 20/100") {
		t.Error("an earlier progress line stayed on screen")
	}
	if want := "tfjob     progress  step 100/100 (100%)  ~3m20s left  loss 0.1\n"; !strings.HasSuffix(screen, want) {
		t.Errorf("the screen does not end with the last progress %q", want)
	}
	if !strings.Contains(screen, "tfjob     state Running -> Succeeded\n") {
		t.Error("the state lines are not on screen")
	}
}

// setJobStatus writes the job's status, as the operator would.
func setJobStatus(t *testing.T, job *v1beta1.TfJob, st v1beta1.JobStatus) {
	t.Helper()
	must(t, jobtest.Retry(func() error {
		var cur v1beta1.TfJob
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &cur); err != nil {
			return err
		}
		cur.Status = st
		return k8s.Status().Update(context.Background(), &cur)
	}))
}
