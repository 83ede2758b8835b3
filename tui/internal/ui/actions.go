package ui

import (
	"context"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/mlkube/mlkube/tui/internal/kube"
)

// key handles a key press.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "ctrl+c":
		return tea.Quit
	case "alt+esc": // esc pressed twice in quick succession reads as one alt+esc
		esc := tea.KeyPressMsg{Code: tea.KeyEscape}
		return tea.Batch(m.key(esc), m.key(esc))
	}
	if m.inputMode != inputNone {
		return m.inputKey(k)
	}
	if m.showHelp {
		switch {
		case key.Matches(k, m.keys.Quit):
			return tea.Quit
		case key.Matches(k, m.keys.Help, m.keys.Back):
			m.showHelp = false
		}
		return nil
	}
	switch {
	case key.Matches(k, m.keys.Quit):
		return tea.Quit
	case key.Matches(k, m.keys.Help):
		m.showHelp = true
		return nil
	}
	switch m.screen {
	case screenJobs:
		return m.jobsKey(k)
	case screenJob:
		return m.jobKey(k)
	}
	return m.logsKey(k)
}

// moveKey moves a table's cursor; it says whether k was a movement key.
func (m *Model) moveKey(k tea.KeyPressMsg, t *table) bool {
	page := max(t.height-1, 1)
	switch {
	case key.Matches(k, m.keys.Up):
		t.move(-1)
	case key.Matches(k, m.keys.Down):
		t.move(1)
	case key.Matches(k, m.keys.PageUp):
		t.move(-page)
	case key.Matches(k, m.keys.PageDown):
		t.move(page)
	case key.Matches(k, m.keys.Top):
		t.setCursor(0)
	case key.Matches(k, m.keys.Bottom):
		t.setCursor(len(t.rows) - 1)
	default:
		return false
	}
	return true
}

func (m *Model) jobsKey(k tea.KeyPressMsg) tea.Cmd {
	if m.moveKey(k, &m.jobs.table) {
		return nil
	}
	j := m.jobs.selected()
	switch {
	case key.Matches(k, m.keys.Enter):
		if j != nil {
			return m.openJob(j)
		}
	case key.Matches(k, m.keys.Logs):
		if j != nil {
			cmd := m.openJob(j)
			m.job.logsOnce = true
			return cmd
		}
	case key.Matches(k, m.keys.Tensorboard):
		if j == nil {
			return nil
		}
		if j.Tensorboard == nil {
			return m.setFlash(j.Name + " has no TensorBoard (its spec.tensorboard is unset)")
		}
		return tea.Batch(m.openJob(j), m.startForward(j))
	case key.Matches(k, m.keys.Filter):
		m.inputMode = inputFilter
		m.input.Prompt = "/"
		m.input.Placeholder = "filter jobs"
		m.input.SetValue(m.jobs.filter)
		m.input.CursorEnd()
		return m.input.Focus()
	case key.Matches(k, m.keys.Sort):
		m.jobs.toggleSort()
	case key.Matches(k, m.keys.Back):
		m.jobs.setFilter("")
	}
	return nil
}

func (m *Model) jobKey(k tea.KeyPressMsg) tea.Cmd {
	if m.moveKey(k, &m.job.repTable) {
		return nil
	}
	switch {
	case key.Matches(k, m.keys.Logs):
		if r := m.job.selected(); r != nil {
			return m.openLogs(r, false)
		}
	case key.Matches(k, m.keys.Tensorboard):
		j := m.jobs.job(m.job.key)
		switch {
		case m.fwd.state != "":
			return m.stopForward()
		case j == nil || j.Tensorboard == nil:
			return m.setFlash(m.job.key.Name + " has no TensorBoard (its spec.tensorboard is unset)")
		}
		return m.startForward(j)
	case key.Matches(k, m.keys.Back):
		return m.closeJob()
	}
	return nil
}

func (m *Model) logsKey(k tea.KeyPressMsg) tea.Cmd {
	p := &m.logs
	page := max(p.vp.Height()-1, 1)
	switch {
	case key.Matches(k, m.keys.Up):
		p.scroll(-1)
	case key.Matches(k, m.keys.Down):
		p.scroll(1)
	case key.Matches(k, m.keys.PageUp):
		p.scroll(-page)
	case key.Matches(k, m.keys.PageDown):
		p.scroll(page)
	case key.Matches(k, m.keys.Top):
		p.top()
	case key.Matches(k, m.keys.Bottom):
		p.bottom()
	case key.Matches(k, m.keys.PrevReplica, m.keys.NextReplica):
		delta := 1
		if key.Matches(k, m.keys.PrevReplica) {
			delta = -1
		}
		if i := m.job.indexOf(p.pod); i >= 0 && len(m.job.shown) > 1 {
			next := (i + delta + len(m.job.shown)) % len(m.job.shown)
			m.job.repTable.setCursor(next)
			return m.openLogs(m.job.shown[next], false)
		}
	case key.Matches(k, m.keys.Follow):
		p.toggleFollow()
	case key.Matches(k, m.keys.Timestamps):
		p.toggleTimestamps()
	case key.Matches(k, m.keys.Previous):
		if r, ok := m.job.replicas[p.pod]; ok {
			return m.openLogs(r, !p.previous)
		}
	case key.Matches(k, m.keys.Search):
		m.inputMode = inputSearch
		m.input.Prompt = "/"
		m.input.Placeholder = "search the log"
		m.input.SetValue("")
		return m.input.Focus()
	case key.Matches(k, m.keys.NextMatch):
		p.next(1)
	case key.Matches(k, m.keys.PrevMatch):
		p.next(-1)
	case key.Matches(k, m.keys.Back):
		if p.query != "" {
			p.search("")
			return nil
		}
		return m.closeLogs()
	}
	return nil
}

// inputKey edits the filter or the search; enter keeps it, esc drops it.
func (m *Model) inputKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "enter":
		if m.inputMode == inputSearch {
			m.logs.search(m.input.Value())
		} else {
			m.jobs.setFilter(m.input.Value())
		}
		m.inputMode = inputNone
		m.input.Blur()
		return nil
	case "esc":
		if m.inputMode == inputFilter {
			m.jobs.setFilter("")
		}
		m.inputMode = inputNone
		m.input.Blur()
		return nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	if m.inputMode == inputFilter {
		m.jobs.setFilter(m.input.Value()) // the list narrows as you type
	}
	return cmd
}

// openJob shows a job and starts watching its pods and events.
func (m *Model) openJob(j *kube.Job) tea.Cmd {
	m.job = newJobView(m.st, j.Key(), 0)
	m.screen = screenJob
	return m.watchJob(j)
}

// watchJob (re)starts the watch of the open job's pods and events, for the job j is (its UID):
// what the last watch sent is dropped.
func (m *Model) watchJob(j *kube.Job) tea.Cmd {
	var cmds []tea.Cmd
	if stop := m.stopJob; stop != nil {
		cmds = append(cmds, do(stop))
		m.stopJob = nil
	}
	m.clearJobErrors()
	m.ids++
	id, key, uid := m.ids, j.Key(), j.UID
	m.job.watch, m.job.uid, m.job.synced = id, uid, false
	clear(m.job.replicas)
	clear(m.job.events)
	if m.cfg.Cluster == nil {
		return tea.Batch(cmds...)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.stopJob = cancel
	c := m.cfg.Cluster
	return tea.Batch(append(cmds, do(func() { c.WatchJob(ctx, id, key, uid) }))...)
}

// clearJobErrors drops the errors of the job's watch: it has stopped.
func (m *Model) clearJobErrors() {
	for _, src := range append([]string(nil), m.errOrder...) {
		if e := m.errs[src]; e.Watch != 0 {
			m.clearError(src)
		}
	}
}

// closeJob goes back to the job list: the job's watch and its port-forward stop.
func (m *Model) closeJob() tea.Cmd {
	cmds := []tea.Cmd{m.stopForward()}
	if stop := m.stopJob; stop != nil {
		cmds = append(cmds, do(stop))
		m.stopJob = nil
	}
	m.clearJobErrors()
	m.screen = screenJobs
	return tea.Batch(cmds...)
}

// openLogs shows a replica's log, or its previous container's, in place of the one shown.
func (m *Model) openLogs(r *kube.Replica, previous bool) tea.Cmd {
	var cmds []tea.Cmd
	if stop := m.stopLogs; stop != nil {
		cmds = append(cmds, do(stop))
		m.stopLogs = nil
	}
	m.ids++
	id := m.ids
	timestamps := m.screen == screenLogs && m.logs.timestamps // kept from replica to replica
	m.logs = newLogPane(m.st, id, r, previous)
	m.logs.timestamps = timestamps
	m.screen = screenLogs
	m.layout()
	if m.cfg.Cluster == nil {
		return tea.Batch(cmds...)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.stopLogs = cancel
	c := m.cfg.Cluster
	req := kube.LogRequest{Namespace: r.Namespace, Pod: r.Name, Container: r.Container, Previous: previous}
	return tea.Batch(append(cmds, do(func() { c.StreamLogs(ctx, id, req) }))...)
}

// closeLogs goes back to the job.
func (m *Model) closeLogs() tea.Cmd {
	m.screen = screenJob
	if stop := m.stopLogs; stop != nil {
		m.stopLogs = nil
		return do(stop)
	}
	return nil
}

// startForward port-forwards to the job's TensorBoard.
func (m *Model) startForward(j *kube.Job) tea.Cmd {
	m.ids++
	m.fwd = forward{id: m.ids, job: j.Key(), state: "starting"}
	if m.cfg.Cluster == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.fwd.stop = cancel
	c, id, ns, svc := m.cfg.Cluster, m.ids, j.Namespace, j.Tensorboard.ServiceName
	if svc == "" {
		svc = j.Name + "-tensorboard"
	}
	return do(func() { c.PortForward(ctx, id, ns, svc) })
}

func (m *Model) stopForward() tea.Cmd {
	stop := m.fwd.stop
	m.fwd = forward{}
	if stop == nil {
		return nil
	}
	return do(stop)
}
