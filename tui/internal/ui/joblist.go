package ui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// jobList is the list of jobs of every served kind: what the job watches sent, filtered and
// sorted, under a cursor that stays on the same job while the list changes around it.
type jobList struct {
	jobs    map[kube.JobKey]*kube.Job
	shown   []*kube.Job
	byAge   bool   // newest first; else by namespace and name
	filter  string // lower case
	synced  map[string]bool
	kinds   int // how many kinds are watched
	allNS   bool
	table   table
	dirty   bool // the rows must be filtered and sorted again
	started bool // the rows were last drawn with every kind's first list in
	// pos is each shown job's row, as of the last rebuild; changed are the rows whose job
	// changed since in a way that leaves it in its place (a status), to draw again alone.
	pos     map[kube.JobKey]int
	changed []int
}

func newJobList(st styles, allNS bool, kinds int) jobList {
	cols := []column{
		{title: "NAME", min: 8, shrink: 1},
		{title: "KIND", min: 5},
		{title: "STATE", min: 7},
		{title: "READY", min: 10, shrink: 2},
		{title: "RESTARTS", min: 8, right: true},
		{title: "AGE", min: 5, right: true},
	}
	if allNS {
		cols = append([]column{{title: "NAMESPACE", min: 9, max: 20, shrink: 3}}, cols...)
	}
	return jobList{
		jobs:   map[kube.JobKey]*kube.Job{},
		synced: map[string]bool{},
		kinds:  kinds,
		allNS:  allNS,
		table:  newTable(cols, st, true),
	}
}

// upsert adds or replaces a job. A job whose change leaves it where it is (its creation time
// is the same, and it still passes the filter) is drawn again alone, without sorting 5,000
// rows and drawing them all: a status write reaches the screen sooner.
func (l *jobList) upsert(j *kube.Job) {
	k := j.Key()
	old := l.jobs[k]
	l.jobs[k] = j
	if l.dirty || old == nil || !j.CreationTimestamp.Equal(&old.CreationTimestamp) {
		l.dirty = true
		return
	}
	i, shown := l.pos[k]
	switch {
	case shown && l.matches(j):
		l.shown[i] = j
		l.changed = append(l.changed, i)
	case shown || l.matches(j):
		l.dirty = true // it leaves the filtered list, or enters it
	}
}

func (l *jobList) matches(j *kube.Job) bool {
	return l.filter == "" || strings.Contains(l.matchText(j), l.filter)
}

// redrawChanged draws again the rows whose job changed in place (upsert).
func (l *jobList) redrawChanged(now time.Time) {
	if len(l.changed) == 0 {
		return
	}
	for _, i := range l.changed {
		l.table.rows[i] = l.row(l.shown[i], now)
	}
	l.changed = l.changed[:0]
	l.table.layout()
}

func (l *jobList) remove(k kube.JobKey) {
	if _, ok := l.jobs[k]; ok {
		delete(l.jobs, k)
		l.dirty = true
	}
}

func (l *jobList) markSynced(kind string) {
	l.synced[kind] = true
	l.dirty = true
}

// loading is true until every kind's first list is in.
func (l *jobList) loading() bool { return len(l.synced) < l.kinds }

func (l *jobList) setFilter(f string) {
	f = strings.ToLower(strings.TrimSpace(f))
	if f != l.filter {
		l.filter = f
		l.dirty = true
	}
}

func (l *jobList) toggleSort() {
	l.byAge = !l.byAge
	l.dirty = true
}

func (l *jobList) selected() *kube.Job {
	if c := l.table.cursor; c >= 0 && c < len(l.shown) {
		return l.shown[c]
	}
	return nil
}

// rebuild filters, sorts and redraws the rows, keeping the cursor on the job it was on. While
// the first lists come in, a cursor on the top row stays on the top row: the jobs arrive in no
// order, and keeping it on whichever came first left the first screen on a job somewhere in
// the middle of 5,000.
func (l *jobList) rebuild(now time.Time) {
	var keep *kube.JobKey
	if j := l.selected(); j != nil && (l.table.cursor > 0 || l.started) {
		k := j.Key()
		keep = &k
	}
	l.shown = l.shown[:0]
	for _, j := range l.jobs {
		if l.matches(j) {
			l.shown = append(l.shown, j)
		}
	}
	sort.Slice(l.shown, func(a, b int) bool {
		x, y := l.shown[a], l.shown[b]
		if l.byAge && !x.CreationTimestamp.Equal(&y.CreationTimestamp) {
			return y.CreationTimestamp.Before(&x.CreationTimestamp)
		}
		if x.Namespace != y.Namespace {
			return x.Namespace < y.Namespace
		}
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		return x.Kind < y.Kind
	})
	l.refresh(now)
	clear(l.pos)
	if l.pos == nil {
		l.pos = make(map[kube.JobKey]int, len(l.shown))
	}
	for i, j := range l.shown {
		l.pos[j.Key()] = i
	}
	l.changed = l.changed[:0]
	l.started = !l.loading()
	if keep != nil {
		if i, ok := l.pos[*keep]; ok {
			l.table.setCursor(i)
		}
	}
	l.dirty = false
}

// listState is the job's state as the list shows it: a job whose objects the apiserver refuses,
// that is suspended, or that waits on something its user must fix, says so there already, not
// only in its conditions ("Running, CreateRefused", "Running, Suspended", "Waiting,
// ImagePullBackOff").
func listState(j *kube.Job) string {
	state := j.State
	switch {
	case unreadable(j) != "" && state == "":
		state = "Unreadable"
	case unreadable(j) != "":
		// The status is the last the operator wrote: nothing acts on the job now.
		state += ", Unreadable"
	case state == "":
		state = "-"
	}
	for _, c := range j.Conditions {
		// A Waiting job waits on what its Running condition says: "Waiting, ImagePullBackOff".
		if j.State == string(v1beta1.JobStateWaiting) && c.Type == v1beta1.JobRunning && c.Reason != "" {
			state += ", " + c.Reason
		}
		if c.Status != string(metav1.ConditionTrue) {
			continue
		}
		switch c.Type {
		case v1beta1.JobCreateRefused:
			state += ", CreateRefused"
		case v1beta1.JobSuspended:
			// runPolicy.suspend holds it (or it is resuming), or Kueue does: no pods, and none
			// coming. Kueue's verdict is the reason: "Suspended, Queued", "Suspended, Evicted".
			state += ", Suspended"
			if c.Reason != "" && c.Reason != "Suspended" {
				state += ", " + c.Reason
			}
		}
	}
	return state
}

// refresh redraws every row, after the list changed.
func (l *jobList) refresh(now time.Time) {
	rows := make([][]string, len(l.shown))
	for i, j := range l.shown {
		rows[i] = l.row(j, now)
	}
	l.table.setRows(rows)
}

// row is a job's row; its age is the last cell.
func (l *jobList) row(j *kube.Job, now time.Time) []string {
	ready := j.Replicas
	if ready == "" {
		ready = "-"
	}
	r := []string{j.Name, j.Kind, listState(j), ready, fmt.Sprint(j.Restarts), age(now, j.CreationTimestamp.Time)}
	if l.allNS {
		r = append([]string{j.Namespace}, r...)
	}
	return r
}

// showAges brings the ages of the rows on screen up to now. Only theirs: a row's age is
// brought up to date when it comes into view, so the clock's tick costs a screenful of rows,
// not one per job (5,000 jobs created over minutes see an age change every second or so).
func (l *jobList) showAges(now time.Time) {
	lo, hi := l.table.visible()
	changed := false
	for i := lo; i < hi && i < len(l.shown); i++ {
		r := l.table.rows[i]
		if a := age(now, l.shown[i].CreationTimestamp.Time); r[len(r)-1] != a {
			r[len(r)-1] = a
			changed = true
		}
	}
	if changed {
		l.table.layout()
	}
}

func (l *jobList) matchText(j *kube.Job) string {
	return strings.ToLower(j.Namespace + "/" + j.Name + " " + j.Kind + " " + listState(j))
}

// conditionUnreadable is the condition the operator gives a job it cannot read: True, its
// message naming the field.
const conditionUnreadable = "Unreadable"

// unreadable says why the job cannot be read whole, naming the field: as the dashboard read it
// (kube.Job.Unreadable), else as the operator's condition says; "" when it can be.
func unreadable(j *kube.Job) string {
	if j.Unreadable != "" {
		return j.Unreadable
	}
	for _, c := range j.Conditions {
		if c.Type == conditionUnreadable && c.Status == string(metav1.ConditionTrue) {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return ""
}

// nextTick is when the next age on screen changes; 0 when none is shown. The ages of the rows
// out of view do not count: they are brought up to date when they come into view (showAges).
func (l *jobList) nextTick(now time.Time) time.Duration {
	var next time.Duration
	lo, hi := l.table.visible()
	for _, j := range l.shown[lo:min(hi, len(l.shown))] {
		if d := nextAgeChange(now, j.CreationTimestamp.Time); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// title is the line above the table: the kinds, how many jobs, the sort and the filter.
func (l *jobList) title(kinds []string) string {
	n := fmt.Sprint(len(l.shown))
	if l.filter != "" {
		n = fmt.Sprintf("%d/%d", len(l.shown), len(l.jobs))
	}
	s := fmt.Sprintf("%s (%s)", strings.Join(kinds, " · "), n)
	if l.byAge {
		s += "  sort: age"
	} else {
		s += "  sort: name"
	}
	if l.filter != "" {
		s += "  filter: /" + l.filter
	}
	return s
}
