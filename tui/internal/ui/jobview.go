package ui

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// jobView is one job: its replica pods, its conditions and the events about it. The pods and
// events come from a watch of their own (watch), started when the view opens and stopped when
// it closes.
type jobView struct {
	key      kube.JobKey
	uid      types.UID // the job whose pods are watched: a new job of the name is watched anew
	watch    int
	replicas map[string]*kube.Replica
	shown    []*kube.Replica
	events   map[string]*kube.Event
	synced   bool
	logsOnce bool // open the logs of the first replica once the pods are in (l on the job list)

	repTable  table
	condTable table
	evTable   table
	condRows  int
	evRows    int
}

func newJobView(st styles, key kube.JobKey, watch int) jobView {
	return jobView{
		key:      key,
		watch:    watch,
		replicas: map[string]*kube.Replica{},
		events:   map[string]*kube.Event{},
		repTable: newTable([]column{
			{title: "TYPE", min: 4},
			{title: "IDX", min: 3, right: true},
			{title: "POD", min: 10, shrink: 1},
			{title: "PHASE", min: 7, max: 30, shrink: 3},
			{title: "LAST EXIT", min: 9, max: 20, shrink: 2},
			{title: "RESTARTS", min: 8, right: true},
			{title: "NODE", min: 4, max: 30, shrink: 4},
			{title: "AGE", min: 5, right: true},
		}, st, true),
		condTable: newTable([]column{
			{title: "CONDITION", min: 9},
			{title: "STATUS", min: 6},
			{title: "REASON", min: 6, max: 22, shrink: 1},
			{title: "MESSAGE", min: 7, shrink: 2},
		}, st, false),
		evTable: newTable([]column{
			{title: "LAST SEEN", min: 9, right: true},
			{title: "TYPE", min: 7},
			{title: "REASON", min: 6, max: 22, shrink: 1},
			{title: "MESSAGE", min: 7, shrink: 2},
		}, st, false),
	}
}

// rank places a replica type of the job's kind: its deciding types first, then the others as
// its CRD lists them, then types the kind does not know (a pod labelled by hand).
func rank(kind *v1beta1.Kind, typ string) int {
	if kind == nil {
		return 0
	}
	same := func(t string) bool { return strings.EqualFold(t, typ) }
	if i := slices.IndexFunc(kind.Deciders, same); i >= 0 {
		return i
	}
	if i := slices.IndexFunc(kind.Types, same); i >= 0 {
		return len(kind.Deciders) + i
	}
	return math.MaxInt
}

func (v *jobView) sortReplicas() {
	v.shown = v.shown[:0]
	for _, r := range v.replicas {
		v.shown = append(v.shown, r)
	}
	kind := v1beta1.KindNamed(v.key.Kind)
	sort.Slice(v.shown, func(a, b int) bool {
		x, y := v.shown[a], v.shown[b]
		if ox, oy := rank(kind, x.Type), rank(kind, y.Type); ox != oy {
			return ox < oy
		}
		if x.Type != y.Type {
			return x.Type < y.Type
		}
		if x.Index != y.Index {
			return x.Index < y.Index
		}
		return x.Name < y.Name
	})
}

func (v *jobView) selected() *kube.Replica {
	if c := v.repTable.cursor; c >= 0 && c < len(v.shown) {
		return v.shown[c]
	}
	return nil
}

// indexOf is the position of the pod in the table, or -1.
func (v *jobView) indexOf(pod string) int {
	for i, r := range v.shown {
		if r.Name == pod {
			return i
		}
	}
	return -1
}

// rebuild redraws the tables from the replicas, the job's conditions and the events.
func (v *jobView) rebuild(now time.Time, job *kube.Job) {
	var keep string
	if r := v.selected(); r != nil {
		keep = r.Name
	}
	v.sortReplicas()
	rows := make([][]string, len(v.shown))
	for i, r := range v.shown {
		rows[i] = []string{
			r.Type, index(r.Index), r.Name, phase(r), lastExit(r), fmt.Sprint(r.Restarts), dash(r.Node),
			age(now, r.CreationTimestamp.Time),
		}
	}
	v.repTable.setRows(rows)
	if i := v.indexOf(keep); i >= 0 {
		v.repTable.setCursor(i)
	}

	var conds [][]string
	if job != nil {
		for _, c := range job.Conditions {
			conds = append(conds, []string{c.Type, c.Status, c.Reason, oneLine(c.Message)})
		}
	}
	v.condTable.setRows(conds)

	evs := v.eventList(job)
	if len(evs) > v.evRows {
		evs = evs[len(evs)-v.evRows:]
	}
	var erows [][]string
	for _, e := range evs {
		seen := age(now, e.Last)
		if e.Count > 1 {
			seen = fmt.Sprintf("%s (x%d)", seen, e.Count)
		}
		erows = append(erows, []string{seen, e.Type, e.Reason, oneLine(e.Note)})
	}
	v.evTable.setRows(erows)
}

// eventList is the events about this job (not an older job of the same name), oldest first.
func (v *jobView) eventList(job *kube.Job) []*kube.Event {
	var evs []*kube.Event
	for _, e := range v.events {
		if job != nil && e.RegardingUID != "" && job.UID != "" && e.RegardingUID != string(job.UID) {
			continue
		}
		evs = append(evs, e)
	}
	sort.Slice(evs, func(a, b int) bool {
		if !evs[a].Last.Equal(evs[b].Last) {
			return evs[a].Last.Before(evs[b].Last)
		}
		return evs[a].Name < evs[b].Name
	})
	return evs
}

// nextTick is when the next age shown changes, the job's last report's among them; 0 when none
// is shown.
func (v *jobView) nextTick(now time.Time, job *kube.Job) time.Duration {
	var next time.Duration
	consider := func(t time.Time) {
		if d := nextAgeChange(now, t); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, r := range v.shown {
		consider(r.CreationTimestamp.Time)
	}
	for _, e := range v.events {
		consider(e.Last)
	}
	if job != nil && job.Progress != nil {
		consider(job.Progress.ReportTime.Time)
	}
	return next
}

func index(i int) string {
	if i < 0 {
		return "-"
	}
	return fmt.Sprint(i)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// phase is the pod's phase, with the reason its container waits when it does.
func phase(r *kube.Replica) string {
	p := dash(r.Phase)
	if r.Waiting != "" && !r.Running {
		p += " (" + r.Waiting + ")"
	}
	return p
}

// lastExit is the exit code and reason of the container's last termination.
func lastExit(r *kube.Replica) string {
	if !r.Exited {
		return "-"
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", r.ExitCode, r.ExitReason))
}
