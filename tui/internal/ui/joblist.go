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
	jobs   map[kube.JobKey]*kube.Job
	shown  []*kube.Job
	byAge  bool   // newest first; else by namespace and name (kube.JobLess)
	filter string // lower case
	synced map[string]bool
	kinds  []string // the kinds watched
	// previews are the first pages of the kinds whose first list is not in yet (kube.JobsPreview);
	// total is how many jobs the list holds, counted from them, while they stand in for it.
	previews map[string]kube.JobsPreview
	total    int
	allNS    bool
	table    table
	dirty    bool // the rows must be filtered and sorted again
	started  bool // the rows were last drawn with every kind's first list in
	// pos is each shown job's row, as of the last rebuild; changed are the rows whose job
	// changed since in a way that leaves it in its place (a status), to draw again alone.
	pos     map[kube.JobKey]int
	changed []int
}

func kindNames(kinds []*v1beta1.Kind) []string {
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.Name)
	}
	return names
}

func newJobList(st styles, allNS bool, kinds []string) jobList {
	cols := []column{
		{title: "NAME", min: 8, shrink: 1},
		{title: "KIND", min: 5},
		{title: "STATE", min: 7},
		{title: "READY", min: 10, shrink: 2},
		// After READY, where kubectl get shows it (the CRDs' printer columns).
		{title: "PROGRESS", min: 8, max: 20, shrink: 1},
		{title: "RESTARTS", min: 8, right: true},
		{title: "AGE", min: 5, right: true},
	}
	if allNS {
		cols = append([]column{{title: "NAMESPACE", min: 9, max: 20, shrink: 3}}, cols...)
	}
	return jobList{
		jobs:     map[kube.JobKey]*kube.Job{},
		synced:   map[string]bool{},
		previews: map[string]kube.JobsPreview{},
		kinds:    kinds,
		allNS:    allNS,
		table:    newTable(cols, st, true),
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
	delete(l.previews, kind) // the kind's whole list replaces its first page
	l.dirty = true
}

// setPreview takes the first page of a kind whose first list is not in yet.
func (l *jobList) setPreview(p kube.JobsPreview) {
	if !l.synced[p.Kind] {
		l.previews[p.Kind] = p
		l.dirty = true
	}
}

// dropPreview forgets a kind's first page when its list fails: the page would stand, unchanged,
// for as long as the list keeps failing, and the failure is what the screen says instead.
func (l *jobList) dropPreview(kind string) {
	if _, ok := l.previews[kind]; ok {
		delete(l.previews, kind)
		l.dirty = true
	}
}

// previewing is whether the first pages stand in for the kinds whose first list is not in: while
// the list loads, sorted by name and not filtered (a page is the top of the list by name and
// unfiltered, nothing else), once every such kind's page is in.
func (l *jobList) previewing() bool {
	if !l.loading() || l.byAge || l.filter != "" {
		return false
	}
	for _, k := range l.kinds {
		if !l.synced[k] {
			if _, ok := l.previews[k]; !ok {
				return false
			}
		}
	}
	return true
}

// job is the row of a job shown, from its kind's list or its first page; nil when none.
func (l *jobList) job(k kube.JobKey) *kube.Job {
	if j := l.jobs[k]; j != nil {
		return j
	}
	for _, j := range l.previews[k.Kind].Jobs {
		if j.Key() == k {
			return j
		}
	}
	return nil
}

// loading is true until every kind's first list is in.
func (l *jobList) loading() bool { return len(l.synced) < len(l.kinds) }

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
	previewing := l.previewing()
	l.shown = l.shown[:0]
	for _, j := range l.jobs {
		// While previewing, a kind's first page stands in for the jobs its list sent so far.
		if (!previewing || l.synced[j.Kind]) && l.matches(j) {
			l.shown = append(l.shown, j)
		}
	}
	l.total = len(l.shown)
	var last *kube.Job // the least of the pages' last jobs, of those with jobs after them
	if previewing {
		for _, p := range l.previews {
			l.shown = append(l.shown, p.Jobs...)
			l.total += p.Total
			if p.More && len(p.Jobs) > 0 && (last == nil || kube.JobLess(p.Jobs[len(p.Jobs)-1], last)) {
				last = p.Jobs[len(p.Jobs)-1]
			}
		}
	}
	sort.Slice(l.shown, func(a, b int) bool {
		x, y := l.shown[a], l.shown[b]
		if l.byAge && !x.CreationTimestamp.Equal(&y.CreationTimestamp) {
			return y.CreationTimestamp.Before(&x.CreationTimestamp)
		}
		return kube.JobLess(x, y)
	})
	if last != nil {
		// Up to last every job is known; after it, a page's kind has jobs not yet listed, which
		// would go in between: those rows are not drawn until the list is in.
		l.shown = l.shown[:sort.Search(len(l.shown), func(i int) bool { return kube.JobLess(last, l.shown[i]) })]
	}
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
	r := []string{j.Name, j.Kind, listState(j), ready, progressCell(j), fmt.Sprint(j.Restarts), age(now, j.CreationTimestamp.Time)}
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
	n := fmt.Sprint(l.total)
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
