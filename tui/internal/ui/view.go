package ui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// View draws the screen: the top bar, the title of the view, its body, the status lines and
// the key hints. It only reads the model.
func (m Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "tfjob-tui"
	return v
}

// Render is the screen as text.
func (m Model) Render() string {
	if m.width == 0 || m.height == 0 {
		return ""
	}
	lines := append([]string{m.bar()}, m.titleLines()...)
	lines = append(lines, block(m.body(), m.bodyHeight, m.width))
	lines = append(lines, m.statusLines()...)
	lines = append(lines, m.hints()...)
	return strings.Join(lines, "\n")
}

// block makes s exactly h lines of width cells.
func block(s string, h, w int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > h {
		ls = ls[:h]
	}
	for len(ls) < h {
		ls = append(ls, "")
	}
	for i, l := range ls {
		ls[i] = fit(l, w)
	}
	return strings.Join(ls, "\n")
}

func (m Model) bar() string {
	t := m.cfg.Target
	parts := []string{" tfjob-tui"}
	if t.Context != "" {
		parts = append(parts, "context "+t.Context)
	}
	parts = append(parts, t.Scope())
	if t.Server != "" {
		parts = append(parts, t.Server)
	}
	return m.st.bar.Render(fit(strings.Join(parts, " · "), m.width))
}

func (m Model) kindNames() []string {
	names := kindNames(m.cfg.Kinds)
	if len(names) == 0 {
		names = []string{"Jobs"}
	}
	return names
}

// titleLines is the title of the view: one line, or two when it does not fit.
func (m Model) titleLines() []string {
	var ls []string
	if m.screen == screenJob && !m.showHelp {
		ls = joinWrap(m.jobTitle(), " · ", max(m.width-1, 1))
	} else {
		ls = wrap(m.title(), max(m.width-1, 1))
	}
	if len(ls) > 2 {
		ls = ls[:2]
	}
	for i := range ls {
		ls[i] = fit(" "+ls[i], m.width)
	}
	return ls
}

func (m Model) title() string {
	var s string
	switch {
	case m.showHelp:
		s = m.st.title.Render("Help")
	case m.screen == screenJobs:
		s = m.st.title.Render(m.jobs.title(m.kindNames()))
		if m.jobs.loading() && len(m.errs) == 0 {
			s += m.st.dim.Render("  loading…")
		}
	case m.screen == screenJob:
		s = strings.Join(m.jobTitle(), " · ")
	default:
		s = m.st.title.Render(m.logs.title())
	}
	return s
}

// jobTitle is the open job in a line: kind, name, state, ready, restarts, age.
func (m Model) jobTitle() []string {
	k := m.job.key
	name := k.Name
	if m.cfg.Target.Namespace == "" {
		name = k.String()
	}
	s := m.st.title.Render(k.Kind + " " + name)
	j := m.jobs.job(k)
	if j == nil {
		return []string{s, m.st.err.Render("deleted")}
	}
	state := j.State
	if state == "" {
		state = "no status yet"
	}
	parts := []string{s, m.st.stateStyle(j.State).Render(state)}
	if unreadable(j) != "" {
		parts = append(parts, m.st.err.Render("unreadable"))
	}
	if j.Phase != "" && j.Phase != j.State {
		parts = append(parts, "phase "+j.Phase)
	}
	if j.Replicas != "" {
		parts = append(parts, j.Replicas)
	}
	return append(parts, fmt.Sprintf("restarts %d", j.Restarts), "age "+age(m.now, j.CreationTimestamp.Time))
}

// joinWrap joins parts with sep into lines of at most width cells, breaking only between
// parts (a part wider than a line is wrapped on its own).
func joinWrap(parts []string, sep string, width int) []string {
	var lines []string
	cur := ""
	for _, p := range parts {
		switch {
		case cur == "":
			cur = p
		case ansi.StringWidth(cur+sep+p) <= width:
			cur += sep + p
		default:
			lines = append(lines, cur)
			cur = p
		}
	}
	var out []string
	for _, l := range append(lines, cur) {
		out = append(out, wrap(l, width)...)
	}
	return out
}

func (m Model) body() string {
	switch {
	case m.showHelp:
		return m.helpBody()
	case m.screen == screenJobs:
		return m.jobsBody()
	case m.screen == screenJob:
		return m.jobBody()
	}
	return m.logs.View(m.job.shown)
}

func (m Model) jobsBody() string {
	if len(m.jobs.shown) > 0 {
		return m.jobs.table.View()
	}
	var msg string
	switch {
	case m.jobs.loading() && len(m.errs) > 0:
		msg = "no jobs to show: see below"
	case m.jobs.loading():
		msg = "loading jobs…"
	case m.jobs.filter != "":
		msg = fmt.Sprintf("no job matches /%s (esc clears the filter)", m.jobs.filter)
	case m.cfg.Target.Namespace != "":
		msg = fmt.Sprintf("no jobs in namespace %s (-A shows every namespace)", m.cfg.Target.Namespace)
	default:
		msg = "no jobs in any namespace"
	}
	return m.jobs.table.View() + "\n" + m.st.dim.Render(" "+msg)
}

func (m Model) jobBody() string {
	job := m.jobs.job(m.job.key)
	var parts []string
	parts = append(parts, m.unreadableLines(job)...)
	parts = append(parts, m.firstFailureLines(job)...)
	parts = append(parts, m.progressLines(job)...)
	parts = append(parts, m.tensorboardLines(job)...)
	rep := m.job.repTable.View()
	if len(m.job.replicas) == 0 {
		msg := " loading replica pods…"
		if m.job.synced {
			msg = " no replica pods"
		}
		rep += "\n" + m.st.dim.Render(msg)
	}
	parts = append(parts, rep)
	if m.job.condRows > 0 {
		parts = append(parts, m.st.section.Render(" Conditions"), m.job.condTable.View())
	} else {
		parts = append(parts, m.st.section.Render(" Conditions")+m.st.dim.Render(" none"))
	}
	if m.job.evRows > 0 {
		parts = append(parts, m.st.section.Render(" Events"), m.job.evTable.View())
	} else {
		msg := " none"
		if !m.job.synced {
			msg = " loading…"
		}
		parts = append(parts, m.st.section.Render(" Events")+m.st.dim.Render(msg))
	}
	return strings.Join(parts, "\n")
}

// labelled lays out lines beside a section label (" TensorBoard  "), each wrapped to the
// width left, the lines after the first indented under it. add appends a line; the lines made
// so far are in *out.
func (m Model) labelled(label string, out *[]string) (add func(string)) {
	indent := strings.Repeat(" ", len(label))
	w := max(m.width-len(label), 10)
	return func(s string) {
		for _, l := range wrap(s, w) {
			if len(*out) == 0 {
				*out = append(*out, m.st.section.Render(label)+l)
			} else {
				*out = append(*out, indent+l)
			}
		}
	}
}

// unreadableLines say that the job cannot be read whole, which field, and what to do about it;
// none for a job that can be read.
func (m Model) unreadableLines(job *kube.Job) []string {
	if job == nil || unreadable(job) == "" {
		return nil
	}
	var out []string
	add := m.labelled(" Unreadable   ", &out)
	add(m.st.err.Render(unreadable(job)))
	add(v1beta1.UnreadableHint)
	return out
}

// tensorboardLines show where the job's TensorBoard is: through the apiserver's service proxy
// (a URL that works with the kubeconfig's credentials), in the cluster, and through the
// port-forward once b started it. URLs wrap rather than get cut.
func (m Model) tensorboardLines(job *kube.Job) []string {
	if job == nil || job.Tensorboard == nil {
		return nil
	}
	tb := job.Tensorboard
	var out []string
	add := m.labelled(" TensorBoard  ", &out)
	ready := m.st.warn.Render("not ready")
	if tb.Ready {
		ready = m.st.ok.Render("ready")
	}
	if tb.ProxyPath != "" {
		add(m.st.link.Render(strings.TrimRight(m.cfg.Target.Server, "/")+tb.ProxyPath) + " " + ready)
	}
	if tb.URL != "" {
		add("in cluster " + m.st.link.Render(tb.URL))
	}
	switch f := m.fwd; {
	case f.state == "" || f.job != job.Key():
		add(m.st.dim.Render("b: port-forward to localhost"))
	case f.state == "starting":
		add("port-forward starting…")
	case f.state == "ready":
		add("port-forward " + m.st.link.Render(f.url) + m.st.dim.Render(" → pod "+f.pod+" (b stops)"))
	default:
		add(m.st.err.Render("port-forward failed: ") + oneLine(fmt.Sprint(f.err)))
	}
	return out
}

func (m Model) helpBody() string {
	var km keyMap
	what := "job list"
	switch m.screen {
	case screenJobs:
		km = m.keys.jobList()
	case screenJob:
		km, what = m.keys.jobView(), "job"
	default:
		km, what = m.keys.logs(), "logs"
	}
	h := m.help
	h.SetWidth(m.width - 2)
	lines := []string{
		m.st.section.Render(" Keys of the " + what + " view"),
		"",
		indentLines(h.FullHelpView(km.FullHelp()), " "),
		"",
		m.st.section.Render(" Columns"),
	}
	for _, p := range []string{
		"READY: ready/total pods per replica type (status.replicas). RESTARTS: status.restarts.",
		"PROGRESS: the trainers' progress (status.progress.summary); stalled: no larger step within progressDeadlineSeconds.",
		"LAST EXIT: exit code and reason of the container's last termination.",
		"",
		"tfjob-tui only reads: it never changes the cluster.",
	} {
		for _, l := range wrap(p, m.width-2) {
			lines = append(lines, " "+l)
		}
	}
	return strings.Join(lines, "\n")
}

func indentLines(s, prefix string) string {
	ls := strings.Split(s, "\n")
	for i := range ls {
		ls[i] = prefix + ls[i]
	}
	return strings.Join(ls, "\n")
}

// errorsShown orders the failed sources for the status lines, which hold four: the job kinds'
// lists in the kinds table's order (a user refused several kinds reads TfJob's first, whichever
// refusal came back first), then everything else as it failed.
func (m Model) errorsShown() []string {
	rank := func(src string) int {
		if k := v1beta1.KindNamed(m.errs[src].Kind); k != nil {
			return k.Order
		}
		return math.MaxInt
	}
	order := slices.Clone(m.errOrder)
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	return order
}

// statusLines are the lines above the key hints: the filter or search being typed, the
// errors of watches (each says what to do; the same error of several watches once), a flash,
// and the log stream's state. At least one line, at most four, so the body never jumps by
// more.
func (m Model) statusLines() []string {
	w := max(m.width, 2)
	var out []string
	add := func(s string, st lipgloss.Style) {
		for _, l := range wrap(oneLine(strings.TrimSpace(s)), w-1) {
			if len(out) < 4 {
				out = append(out, st.Render(fit(" "+l, w)))
			}
		}
	}
	if m.inputMode != inputNone {
		out = append(out, fit(m.input.View(), w))
	}
	seen := map[string]bool{}
	for _, src := range m.errorsShown() {
		msg := m.errs[src].Err.Error()
		if !seen[msg] {
			seen[msg] = true
			add(msg, m.st.err)
		}
	}
	if j := m.jobs.selected(); m.screen == screenJobs && !m.showHelp && j != nil && unreadable(j) != "" {
		add(fmt.Sprintf("%s %s is unreadable: %s; %s", j.Kind, j.Key(), unreadable(j), v1beta1.UnreadableHint), m.st.warn)
	}
	if m.screen == screenLogs && !m.showHelp {
		if m.logs.err != nil {
			add(m.logs.err.Error(), m.st.err)
		} else {
			add(m.logs.status(), m.st.dim)
		}
	}
	if m.flash != "" {
		add(m.flash, m.st.flash)
	}
	if len(out) == 0 {
		out = append(out, "")
	}
	return out
}

// keyMap is the bindings of what is on screen.
func (m Model) keyMap() keyMap {
	switch {
	case m.inputMode != inputNone:
		return m.keys.input()
	case m.showHelp:
		return m.keys.helpScreen()
	case m.screen == screenJobs:
		return m.keys.jobList()
	case m.screen == screenJob:
		return m.keys.jobView()
	}
	return m.keys.logs()
}

// hints is the key hint bar: the view's keys on one line, or two when one is too narrow.
func (m Model) hints() []string {
	h := m.help
	h.SetWidth(m.width - 1)
	sep := width(h.ShortSeparator)
	var lines [][]key.Binding
	var cur []key.Binding
	used := 1
	for _, b := range m.keyMap().ShortHelp() {
		item := width(b.Help().Key) + 1 + width(b.Help().Desc)
		if len(cur) > 0 && used+sep+item > m.width && len(lines) == 0 {
			lines, cur, used = append(lines, cur), nil, 1
		}
		if len(cur) > 0 {
			used += sep
		}
		cur = append(cur, b)
		used += item
	}
	lines = append(lines, cur)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = " " + h.ShortHelpView(l)
	}
	return out
}
