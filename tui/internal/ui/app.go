// Package ui is tfjob-tui's Bubble Tea program: a root model composed of a job list, a job
// view (replicas, conditions, events), a log pane and a help bar. Cluster changes arrive as
// kube.Batch messages; Update applies them, and View only draws.
package ui

import (
	"context"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// Cluster is what the model asks of the cluster. Each call starts work and returns at once;
// results come back as messages from Next. kube.Client is the real one.
type Cluster interface {
	Next(ctx context.Context) (kube.Batch, bool)
	WatchJobs(ctx context.Context)
	WatchJob(ctx context.Context, id int, key kube.JobKey, uid types.UID)
	StreamLogs(ctx context.Context, id int, req kube.LogRequest)
	PortForward(ctx context.Context, id int, namespace, service string)
}

// Config sets up a Model.
type Config struct {
	Context context.Context // ends every watch, stream and port-forward the model starts
	Cluster Cluster         // nil: the model shows only what it is sent (tests)
	Target  kube.Target
	Kinds   []*v1beta1.Kind
	NoColor bool
	Now     time.Time // the clock until the first batch
	// FrozenClock: ages move only with the batches' times, never by themselves (tests).
	FrozenClock bool
}

type screen int

const (
	screenJobs screen = iota
	screenJob
	screenLogs
)

type inputMode int

const (
	inputNone inputMode = iota
	inputFilter
	inputSearch
)

// forward is the port-forward to the TensorBoard of the open job.
type forward struct {
	id    int
	job   kube.JobKey
	state string // starting, ready, failed
	url   string
	pod   string
	err   error
	stop  context.CancelFunc
}

// Model is the root model.
type Model struct {
	cfg    Config
	ctx    context.Context
	st     styles
	keys   keys
	help   help.Model
	width  int
	height int
	now    time.Time

	screen   screen
	showHelp bool

	jobs jobList
	job  jobView
	logs logPane

	input     textinput.Model
	inputMode inputMode

	ids      int // the last id given to a job watch, log stream or port-forward
	stopJob  context.CancelFunc
	stopLogs context.CancelFunc
	fwd      forward

	errs     map[string]kube.WatchFailed
	errOrder []string
	flash    string
	flashSeq int

	tickSeq int
	tickAt  time.Time

	bodyHeight int
}

// New makes the root model.
func New(cfg Config) Model {
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	st := newStyles(cfg.NoColor)
	h := help.New()
	h.Styles = st.help
	h.ShortSeparator = "  " // keys are bold: two spaces part them, and 80 columns hold the list's
	in := textinput.New()
	is := textinput.DefaultDarkStyles()
	is.Cursor.Blink = false // a blinking cursor would redraw twice a second
	if cfg.NoColor {
		is = textinput.Styles{}
	}
	in.SetStyles(is)
	return Model{
		cfg:   cfg,
		ctx:   cfg.Context,
		st:    st,
		keys:  newKeys(),
		help:  h,
		now:   cfg.Now,
		jobs:  newJobList(st, cfg.Target.Namespace == "", kindNames(cfg.Kinds)),
		input: in,
		errs:  map[string]kube.WatchFailed{},
	}
}

type tickMsg struct {
	seq int
	at  time.Time
}

type flashDoneMsg struct{ seq int }

// Init starts the job watches and listens for what they send.
func (m Model) Init() tea.Cmd {
	if m.cfg.Cluster == nil {
		return nil
	}
	c, ctx := m.cfg.Cluster, m.ctx
	return tea.Batch(m.listen(), func() tea.Msg { c.WatchJobs(ctx); return nil })
}

// listen waits for the next batch from the cluster.
func (m Model) listen() tea.Cmd {
	if m.cfg.Cluster == nil {
		return nil
	}
	c, ctx := m.cfg.Cluster, m.ctx
	return func() tea.Msg {
		b, ok := c.Next(ctx)
		if !ok {
			return nil
		}
		return b
	}
}

// Update applies a message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
		m.input.SetWidth(max(msg.Width-4, 1))
	case kube.Batch:
		if !msg.At.IsZero() {
			m.now = msg.At
		}
		for _, x := range msg.Msgs {
			cmds = append(cmds, m.apply(x))
		}
		cmds = append(cmds, m.listen())
	case tickMsg:
		if msg.seq != m.tickSeq {
			return m, nil
		}
		m.now, m.tickAt = msg.at, time.Time{}
	case flashDoneMsg:
		if msg.seq == m.flashSeq {
			m.flash = ""
		}
	case tea.KeyPressMsg:
		cmds = append(cmds, m.key(msg))
	default:
		if m.inputMode != inputNone {
			var c tea.Cmd
			m.input, c = m.input.Update(msg)
			cmds = append(cmds, c)
		}
	}
	m.layout()
	if m.jobs.dirty {
		m.jobs.rebuild(m.now)
	} else {
		m.jobs.redrawChanged(m.now)
	}
	m.jobs.showAges(m.now) // the clock ticked, or other rows came into view
	if m.screen != screenJobs {
		m.job.rebuild(m.now, m.jobs.job(m.job.key))
	}
	cmds = append(cmds, m.scheduleTick())
	return m, tea.Batch(cmds...)
}

// apply applies one message from the cluster.
func (m *Model) apply(x any) tea.Cmd {
	switch x := x.(type) {
	case kube.JobUpserted:
		m.jobs.upsert(x.Job)
		if m.screen != screenJobs && x.Job.Key() == m.job.key && x.Job.UID != m.job.uid {
			// A new job of the open one's name: its pods are another job's.
			return m.watchJob(x.Job)
		}
	case kube.JobDeleted:
		m.jobs.remove(x.Key)
	case kube.JobsPreview:
		m.jobs.setPreview(x)
	case kube.JobsSynced:
		m.jobs.markSynced(x.Kind)
	case kube.ReplicaUpserted:
		if m.screen != screenJobs && x.Watch == m.job.watch {
			m.job.replicas[x.Replica.Name] = x.Replica
			return m.replicaChanged(x.Replica)
		}
	case kube.ReplicaDeleted:
		if m.screen != screenJobs && x.Watch == m.job.watch {
			delete(m.job.replicas, x.Name)
		}
	case kube.EventUpserted:
		if m.screen != screenJobs && x.Watch == m.job.watch {
			m.job.events[x.Event.Name] = x.Event
		}
	case kube.EventDeleted:
		if m.screen != screenJobs && x.Watch == m.job.watch {
			delete(m.job.events, x.Name)
		}
	case kube.ReplicasSynced:
		if m.screen != screenJobs && x.Watch == m.job.watch {
			m.job.synced = true
			if m.job.logsOnce {
				m.job.logsOnce = false
				m.job.sortReplicas()
				if len(m.job.shown) > 0 {
					return m.openLogs(m.job.shown[0], false)
				}
				return m.setFlash("no replica pods to show logs of")
			}
		}
	case kube.WatchFailed:
		if x.Kind != "" {
			m.jobs.dropPreview(x.Kind)
		}
		if x.Watch == 0 || (m.screen != screenJobs && x.Watch == m.job.watch) {
			if _, ok := m.errs[x.Source]; !ok {
				m.errOrder = append(m.errOrder, x.Source)
			}
			m.errs[x.Source] = x
		}
	case kube.WatchOK:
		m.clearError(x.Source)
	case kube.LogLines:
		if m.screen == screenLogs && x.Stream == m.logs.stream {
			m.logs.add(x.Lines)
		}
	case kube.LogEnded:
		if m.screen == screenLogs && x.Stream == m.logs.stream {
			m.logs.ended, m.logs.err = true, x.Err
			return m.maybeReconnect()
		}
	case kube.PortForwardReady:
		if x.ID == m.fwd.id && m.fwd.state != "" {
			m.fwd.state, m.fwd.url, m.fwd.pod, m.fwd.err = "ready", x.LocalURL, x.Pod, nil
		}
	case kube.PortForwardFailed:
		if x.ID == m.fwd.id && m.fwd.state != "" {
			m.fwd.state, m.fwd.err = "failed", x.Err
		}
	}
	return nil
}

func (m *Model) clearError(source string) {
	if _, ok := m.errs[source]; !ok {
		return
	}
	delete(m.errs, source)
	for i, s := range m.errOrder {
		if s == source {
			m.errOrder = append(m.errOrder[:i:i], m.errOrder[i+1:]...)
			break
		}
	}
}

// replicaChanged follows the container into its next life: when the replica whose log is
// shown restarts (a new container, or a new pod under the same name), the log stream that
// ended with the old one starts again.
func (m *Model) replicaChanged(r *kube.Replica) tea.Cmd {
	if m.screen != screenLogs || r.Name != m.logs.pod {
		return nil
	}
	if m.logs.ended && !m.logs.previous && r.Running &&
		(r.ContainerID != m.logs.containerID || string(r.UID) != m.logs.uid) {
		return m.reconnect(r)
	}
	return nil
}

// maybeReconnect restarts a log stream that ended because its container did, when the
// replica already runs a new one.
func (m *Model) maybeReconnect() tea.Cmd {
	if m.logs.previous || m.logs.err != nil {
		return nil
	}
	r, ok := m.job.replicas[m.logs.pod]
	if ok && r.Running && (r.ContainerID != m.logs.containerID || string(r.UID) != m.logs.uid) {
		return m.reconnect(r)
	}
	return nil
}

// reconnect streams the new container's log below the old one's lines.
func (m *Model) reconnect(r *kube.Replica) tea.Cmd {
	old := m.logs
	cmd := m.openLogs(r, false)
	m.logs.lines, m.logs.display = old.lines, old.display
	m.logs.timestamps, m.logs.follow = old.timestamps, old.follow
	m.logs.add([]kube.LogLine{{Text: "── container restarted ──"}})
	return cmd
}

// layout sizes every part to the window. It runs after every update: the status lines and
// the job's sections change height with what they hold.
func (m *Model) layout() {
	if m.width == 0 || m.height == 0 {
		return
	}
	m.bodyHeight = max(m.height-1-len(m.titleLines())-len(m.statusLines())-len(m.hints()), 1)
	m.jobs.table.setSize(m.width, m.bodyHeight-1)
	if m.screen == screenJobs {
		return
	}
	m.layoutJob()
	if m.screen == screenLogs {
		m.logs.setSize(m.width, m.bodyHeight)
	}
}

// layoutJob shares the body between the replicas, the conditions and the events: the
// replicas first (at least three rows when there are), then the conditions, and the latest
// events in what is left.
func (m *Model) layoutJob() {
	job := m.jobs.job(m.job.key)
	avail := m.bodyHeight - len(m.unreadableLines(job)) - len(m.firstFailureLines(job)) - len(m.progressLines(job)) - len(m.tensorboardLines(job))
	nrep := max(len(m.job.replicas), 1) // "no replica pods" takes a line
	ncond := 0
	if job != nil {
		ncond = len(job.Conditions)
	}
	nev := len(m.job.eventList(job))
	evMin := min(nev, 3)
	repRows := min(nrep, max(avail-1-(2+ncond)-(2+evMin), min(nrep, 3)))
	rest := avail - 1 - repRows
	condRows := min(ncond, max(rest-2-(2+evMin), 0))
	rest -= 2 + condRows
	evRows := min(nev, max(rest-2, 0))
	m.job.repTable.setSize(m.width, repRows)
	m.job.condTable.setSize(m.width, condRows)
	m.job.evTable.setSize(m.width, evRows)
	m.job.condRows, m.job.evRows = condRows, evRows
}

// scheduleTick asks for a tick when the next age on screen changes, unless one comes sooner.
func (m *Model) scheduleTick() tea.Cmd {
	if m.cfg.FrozenClock {
		return nil
	}
	var d time.Duration
	if m.screen == screenJobs {
		d = m.jobs.nextTick(m.now)
	} else {
		d = m.job.nextTick(m.now, m.jobs.job(m.job.key))
	}
	if d <= 0 {
		return nil
	}
	d += 5 * time.Millisecond // wake just after the change, not just before it
	at := m.now.Add(d)
	if !m.tickAt.IsZero() && !at.Before(m.tickAt) {
		return nil
	}
	m.tickSeq++
	m.tickAt = at
	seq := m.tickSeq
	return tea.Tick(d, func(t time.Time) tea.Msg { return tickMsg{seq: seq, at: t} })
}

// setFlash shows a short message in the status line for a few seconds.
func (m *Model) setFlash(s string) tea.Cmd {
	m.flash = s
	m.flashSeq++
	if m.cfg.FrozenClock {
		return nil
	}
	seq := m.flashSeq
	return tea.Tick(4*time.Second, func(time.Time) tea.Msg { return flashDoneMsg{seq: seq} })
}

// do runs f as a command: the model's side effects (starting and stopping watches) happen
// outside Update.
func do(f func()) tea.Cmd {
	return func() tea.Msg { f(); return nil }
}
