package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/tui/internal/kube"
)

// Ages on screen follow the clock, and so do those of rows that come into view later: the
// clock's tick redraws only the rows on screen (5,000 jobs' rows every second cost more than
// the dashboard's whole idle budget), so a row scrolled to must not show the age it had when
// the list was last drawn whole.
func TestAgesFollowTheClockIntoView(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	m := New(Config{Target: kube.Target{Namespace: "team-a"}, Kinds: kube.Kinds, NoColor: true, Now: t0, FrozenClock: true})
	update := func(msg tea.Msg) string {
		next, _ := m.Update(msg)
		m = next.(Model)
		return ansi.Strip(m.Render())
	}
	update(tea.WindowSizeMsg{Width: 80, Height: 12})
	var msgs []any
	for i := range 200 {
		msgs = append(msgs, kube.JobUpserted{Job: &kube.Job{Kind: "TfJob", State: "Running", ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("job-%03d", i), Namespace: "team-a", CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(i) * time.Second)),
		}}})
	}
	for _, k := range kube.Kinds {
		msgs = append(msgs, kube.JobsSynced{Kind: k.Name})
	}
	// At t0 job-000 is 0s old and job-199 199s ("3m"); 90 seconds later 90s and 289s ("4m").
	if s := update(kube.Batch{At: t0, Msgs: msgs}); !rowSays(s, "job-000", "0s") {
		t.Fatalf("job-000 is not 0s old:\n%s", s)
	}
	if s := update(kube.Batch{At: t0.Add(90 * time.Second)}); !rowSays(s, "job-000", "90s") {
		t.Fatalf("the top row's age did not follow the clock:\n%s", s)
	}
	if s := update(tea.KeyPressMsg{Code: 'G', Text: "G"}); !rowSays(s, "job-199", "4m") {
		t.Fatalf("a row scrolled into view shows an old age:\n%s", s)
	}
}

// rowSays is whether the screen's row of a job ends with s.
func rowSays(screen, job, s string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, " "+job+" ") {
			return strings.HasSuffix(strings.TrimRight(l, " "), " "+s)
		}
	}
	return false
}

// A job's new status shows in its row (drawn again alone when the job stays where it is), and
// a change that takes a job out of the filter, or into it, takes its row away, or brings it.
func TestChangedJobsRedraw(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	m := New(Config{Target: kube.Target{Namespace: "team-a"}, Kinds: kube.Kinds, NoColor: true, Now: t0, FrozenClock: true})
	update := func(msg tea.Msg) string {
		next, _ := m.Update(msg)
		m = next.(Model)
		return ansi.Strip(m.Render())
	}
	mk := func(name, state string, restarts int32) kube.JobUpserted {
		return kube.JobUpserted{Job: &kube.Job{Kind: "TfJob", State: state, Restarts: restarts,
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", CreationTimestamp: metav1.NewTime(t0)}}}
	}
	update(tea.WindowSizeMsg{Width: 80, Height: 12})
	update(kube.Batch{At: t0, Msgs: []any{mk("a", "Running", 0), mk("b", "Running", 0), mk("c", "Running", 0)}})
	update(tea.KeyPressMsg{Code: 'j', Text: "j"}) // the cursor on b
	s := update(kube.Batch{At: t0, Msgs: []any{mk("b", "Restarting", 7)}})
	if !strings.Contains(s, "Restarting") || !strings.Contains(s, " 7 ") {
		t.Fatalf("b's new status is not shown:\n%s", s)
	}
	if j := m.jobs.selected(); j == nil || j.Name != "b" {
		t.Fatalf("the cursor left b: %v", j)
	}
	m.jobs.setFilter("running")
	update(kube.Batch{At: t0})
	if s := update(kube.Batch{At: t0, Msgs: []any{mk("a", "Failed", 0), mk("b", "Running", 0)}}); strings.Contains(s, " a ") || !strings.Contains(s, " b ") || !strings.Contains(s, "(2/3)") {
		t.Fatalf("a failed job still passes the filter running, or a running one does not:\n%s", s)
	}
}

// While the first lists come in, in no order, the cursor stays on the top row, and the first
// screen is the top of the list; once they are in, the cursor stays on its job.
func TestCursorStaysOnTopWhileLoading(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	m := New(Config{Target: kube.Target{Namespace: "team-a"}, Kinds: kube.Kinds, NoColor: true, Now: t0, FrozenClock: true})
	update := func(msg tea.Msg) string {
		next, _ := m.Update(msg)
		m = next.(Model)
		return ansi.Strip(m.Render())
	}
	mk := func(i int) any {
		return kube.JobUpserted{Job: &kube.Job{Kind: "TfJob", ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("job-%03d", i), Namespace: "team-a", CreationTimestamp: metav1.NewTime(t0)}}}
	}
	update(tea.WindowSizeMsg{Width: 80, Height: 12})
	update(kube.Batch{At: t0, Msgs: []any{mk(150)}}) // the first to arrive
	var rest []any
	for i := range 200 {
		if i != 150 {
			rest = append(rest, mk(i))
		}
	}
	for _, k := range kube.Kinds {
		rest = append(rest, kube.JobsSynced{Kind: k.Name})
	}
	s := update(kube.Batch{At: t0, Msgs: rest})
	if j := m.jobs.selected(); j == nil || j.Name != "job-000" || !strings.Contains(s, " job-000 ") {
		t.Fatalf("the cursor is on %v, not the top row job-000:\n%s", j, s)
	}
	update(tea.KeyPressMsg{Code: 'j', Text: "j"})
	update(kube.Batch{At: t0, Msgs: []any{kube.JobDeleted{Key: kube.JobKey{Kind: "TfJob", Namespace: "team-a", Name: "job-000"}}}})
	if j := m.jobs.selected(); j == nil || j.Name != "job-001" {
		t.Fatalf("once loaded, the cursor left its job: %v", j)
	}
}
