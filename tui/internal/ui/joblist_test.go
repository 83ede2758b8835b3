package ui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/tui/internal/kube"
)

// Ages on screen follow the clock, and so do those of rows that come into view later: the
// clock's tick redraws only the rows on screen (5,000 jobs' rows every second cost more than
// the dashboard's whole idle budget), so a row scrolled to must not show the age it had when
// the list was last drawn whole.
func TestAgesFollowTheClockIntoView(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	_, update := jobListModel(t0)
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
	m, update := jobListModel(t0)
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
	if j := m().jobs.selected(); j == nil || j.Name != "b" {
		t.Fatalf("the cursor left b: %v", j)
	}
	m().jobs.setFilter("running")
	update(kube.Batch{At: t0})
	if s := update(kube.Batch{At: t0, Msgs: []any{mk("a", "Failed", 0), mk("b", "Running", 0)}}); strings.Contains(s, " a ") || !strings.Contains(s, " b ") || !strings.Contains(s, "(2/3)") {
		t.Fatalf("a failed job still passes the filter running, or a running one does not:\n%s", s)
	}
}

// While the first lists come in, in no order, the cursor stays on the top row, and the first
// screen is the top of the list; once they are in, the cursor stays on its job.
func TestCursorStaysOnTopWhileLoading(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	m, update := jobListModel(t0)
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
	if j := m().jobs.selected(); j == nil || j.Name != "job-000" || !strings.Contains(s, " job-000 ") {
		t.Fatalf("the cursor is on %v, not the top row job-000:\n%s", j, s)
	}
	update(tea.KeyPressMsg{Code: 'j', Text: "j"})
	update(kube.Batch{At: t0, Msgs: []any{kube.JobDeleted{Key: kube.JobKey{Kind: "TfJob", Namespace: "team-a", Name: "job-000"}}}})
	if j := m().jobs.selected(); j == nil || j.Name != "job-001" {
		t.Fatalf("once loaded, the cursor left its job: %v", j)
	}
}

// Until a kind's first list is in, its first page (kube.JobsPreview) stands in for it: the
// title counts every job, and the rows drawn are the top of the list as it is once every
// list is in, up to where a page's kind has jobs not yet listed (TfJob's page ends at
// job-018, so PyTorchJob's job-019 to job-029 wait, job-020 being TfJob's and not yet listed).
// Filtered or sorted by age, a page says nothing about the top, and the list loads as before.
func TestFirstPagesStandInWhileLoading(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	m, update := jobListModel(t0)
	jobs := map[string][]*kube.Job{}
	for i := range 60 { // job-000 to job-059: TfJob the even ones, PyTorchJob the odd ones
		kind := []string{"TfJob", "PyTorchJob"}[i%2]
		jobs[kind] = append(jobs[kind], &kube.Job{Kind: kind, State: "Running", ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("job-%03d", i), Namespace: "team-a", UID: types.UID(fmt.Sprint(i)), CreationTimestamp: metav1.NewTime(t0)}})
	}
	var pages, tf, rest []any
	for _, k := range kube.Kinds {
		p := kube.JobsPreview{Kind: k.Name, Total: len(jobs[k.Name])}
		if n := map[string]int{"TfJob": 10, "PyTorchJob": 15}[k.Name]; n > 0 {
			p.Jobs, p.More = jobs[k.Name][:n], true
		}
		pages = append(pages, p)
		for _, j := range jobs[k.Name] {
			if k.Name == "TfJob" {
				tf = append(tf, kube.JobUpserted{Job: j})
			} else {
				rest = append(rest, kube.JobUpserted{Job: j})
			}
		}
		if k.Name == "TfJob" {
			tf = append(tf, kube.JobsSynced{Kind: k.Name})
		} else {
			rest = append(rest, kube.JobsSynced{Kind: k.Name})
		}
	}
	update(tea.WindowSizeMsg{Width: 80, Height: 12})
	s := update(kube.Batch{At: t0, Msgs: pages[:1]})
	if strings.Contains(s, "(10)") || strings.Contains(s, " job-000 ") {
		t.Fatalf("one kind's page stands in for the list while the other kinds' are missing:\n%s", s)
	}
	s = update(kube.Batch{At: t0, Msgs: pages[1:]})
	if !strings.Contains(s, "(60)") || !strings.Contains(s, "loading…") {
		t.Fatalf("the title does not count every job, loading:\n%s", s)
	}
	early := rowKeys(m().jobs.shown)
	if len(early) != 19 || m().jobs.selected().Name != "job-000" {
		t.Fatalf("the pages show %d rows (want job-000 to job-018), the cursor on %v", len(early), m().jobs.selected())
	}
	update(tea.KeyPressMsg{Code: 'G', Text: "G"})
	if j := m().jobs.selected(); j.Name != "job-018" || m().jobs.job(j.Key()) != j {
		t.Fatalf("the last row drawn is %s, not job-018, or it cannot be opened", j.Name)
	}
	update(tea.KeyPressMsg{Code: 'g', Text: "g"})
	m().jobs.setFilter("job-05")
	if s := update(kube.Batch{At: t0}); !strings.Contains(s, "(0/0)") {
		t.Fatalf("filtered, the list is not the jobs listed so far:\n%s", s)
	}
	m().jobs.setFilter("")
	failed := kube.WatchFailed{Source: "pytorchjobs", Kind: "PyTorchJob", Err: fmt.Errorf("forbidden")}
	if s := update(kube.Batch{At: t0, Msgs: []any{failed}}); strings.Contains(s, "(60)") || strings.Contains(s, " job-000 ") {
		t.Fatalf("a kind whose list fails still stands in for its list with its page:\n%s", s)
	}
	// As if it had not failed: the rest of the test is about the pages.
	update(kube.Batch{At: t0, Msgs: append([]any{kube.WatchOK{Source: failed.Source}}, pages...)})
	update(kube.Batch{At: t0, Msgs: tf}) // TfJob's list in, PyTorchJob's page still standing in
	mid := rowKeys(m().jobs.shown)
	update(kube.Batch{At: t0, Msgs: rest})
	if s := ansi.Strip(m().Render()); !strings.Contains(s, "(60)") || strings.Contains(s, "loading…") {
		t.Fatalf("the whole list is not in:\n%s", s)
	}
	all := rowKeys(m().jobs.shown)
	if len(mid) != 30 || !slices.Equal(mid, all[:len(mid)]) || !slices.Equal(early, all[:len(early)]) {
		t.Fatalf("while loading the rows were\n%v\nthen\n%v\nnot the top of\n%v", early, mid, all)
	}
}

func rowKeys(jobs []*kube.Job) []string {
	var ks []string
	for _, j := range jobs {
		ks = append(ks, j.Kind+" "+j.Name)
	}
	return ks
}

// jobListModel is a dashboard on namespace team-a whose clock stays at t0, and update, which
// gives it a message and returns the screen as text.
func jobListModel(t0 time.Time) (m func() *Model, update func(tea.Msg) string) {
	model := New(Config{Target: kube.Target{Namespace: "team-a"}, Kinds: kube.Kinds, NoColor: true, Now: t0, FrozenClock: true})
	return func() *Model { return &model }, func(msg tea.Msg) string {
		next, _ := model.Update(msg)
		model = next.(Model)
		return ansi.Strip(model.Render())
	}
}
