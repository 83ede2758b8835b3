package ui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/viewport"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/mlkube/mlkube/tui/internal/kube"
)

// maxLogLines is the scrollback: older lines are dropped.
const maxLogLines = 10000

// sideWidth is the width of the replica list beside the log; it is hidden on narrow screens.
const sideWidth = 16

// logPane follows the log of one replica's container. Lines arrive as LogLines of its stream;
// switching replica, or to the previous container, starts a new stream and drops the old one's
// lines.
type logPane struct {
	stream      int
	namespace   string
	pod         string
	uid         string
	container   string
	containerID string // of the container when the stream started
	previous    bool

	lines   []kube.LogLine
	display []string // lines as drawn, with timestamps and highlights when asked
	ended   bool
	err     error

	timestamps bool
	follow     bool

	query   string // lower case; "" is no search
	matches []int  // indices of lines that hold query
	match   int    // the current one, in matches

	vp            viewport.Model
	width, height int
	side          bool
	st            styles
}

func newLogPane(st styles, stream int, r *kube.Replica, previous bool) logPane {
	vp := viewport.New()
	vp.KeyMap = viewport.KeyMap{} // keys are the app's
	vp.MouseWheelEnabled = false
	return logPane{
		stream: stream, namespace: r.Namespace, pod: r.Name, uid: string(r.UID), container: r.Container,
		containerID: r.ContainerID, previous: previous, follow: true, match: -1, vp: vp, st: st,
	}
}

func (p *logPane) setSize(w, h int) {
	p.width, p.height = w, h
	p.side = w >= 60
	vw := w
	if p.side {
		vw = w - sideWidth - 1
	}
	p.vp.SetWidth(max(vw, 1))
	p.vp.SetHeight(max(h, 1))
	p.sync()
}

// add appends new lines of the stream.
func (p *logPane) add(lines []kube.LogLine) {
	start := len(p.lines)
	p.lines = append(p.lines, lines...)
	for i := start; i < len(p.lines); i++ {
		if p.query != "" && strings.Contains(strings.ToLower(p.lines[i].Text), p.query) {
			p.matches = append(p.matches, i)
		}
		p.display = append(p.display, p.render(i))
	}
	if drop := len(p.lines) - maxLogLines; drop >= maxLogLines/10 {
		p.drop(drop)
	}
	p.sync()
}

// drop forgets the oldest n lines.
func (p *logPane) drop(n int) {
	p.lines = append([]kube.LogLine(nil), p.lines[n:]...)
	p.display = append([]string(nil), p.display[n:]...)
	kept := p.matches[:0]
	for _, m := range p.matches {
		if m >= n {
			kept = append(kept, m-n)
		}
	}
	switch removed := len(p.matches) - len(kept); {
	case len(kept) == 0:
		p.match = -1
	case p.match >= 0:
		p.match = max(p.match-removed, 0)
	}
	p.matches = kept
	p.vp.SetYOffset(max(p.vp.YOffset()-n, 0))
}

// sync hands the lines to the viewport, at the bottom when following.
func (p *logPane) sync() {
	p.vp.SetContentLines(p.display)
	if p.follow {
		p.vp.GotoBottom()
	}
}

// redraw renders every line again, after the timestamps or the search changed.
func (p *logPane) redraw() {
	p.display = p.display[:0]
	for i := range p.lines {
		p.display = append(p.display, p.render(i))
	}
	p.sync()
}

// render draws line i.
func (p *logPane) render(i int) string {
	l := p.lines[i]
	text := clean(l.Text)
	if p.query != "" {
		style := p.st.match
		if p.match >= 0 && p.match < len(p.matches) && p.matches[p.match] == i {
			style = p.st.current
		}
		text = highlight(text, p.query, style)
	}
	if p.timestamps {
		text = p.st.dim.Render(shortTime(l.Time)) + " " + text
	}
	return text
}

// clean makes a log line safe to draw: no escape sequences, no tabs.
func clean(s string) string {
	if strings.ContainsAny(s, "\x1b\t\r") {
		s = strings.ReplaceAll(ansi.Strip(s), "\t", "    ")
		s = strings.ReplaceAll(s, "\r", "")
	}
	return s
}

// highlight styles every case-insensitive occurrence of q (lower case) in s.
func highlight(s, q string, style lipgloss.Style) string {
	lower := strings.ToLower(s)
	if len(lower) != len(s) { // case folding moved bytes: mark the whole line
		return style.Render(s)
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, q)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(style.Render(s[i : i+len(q)]))
		s, lower = s[i+len(q):], lower[i+len(q):]
	}
}

// shortTime shows the kubelet's timestamp to the millisecond, in UTC.
func shortTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return fit("", 24)
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (p *logPane) toggleTimestamps() {
	p.timestamps = !p.timestamps
	p.redraw()
}

func (p *logPane) toggleFollow() {
	p.follow = !p.follow
	p.sync()
}

// scroll moves the view; moving up stops following, as in less +F.
func (p *logPane) scroll(n int) {
	if n < 0 {
		p.follow = false
		p.vp.ScrollUp(-n)
	} else {
		p.vp.ScrollDown(n)
	}
}

func (p *logPane) top() {
	p.follow = false
	p.vp.GotoTop()
}

func (p *logPane) bottom() { p.vp.GotoBottom() }

// search finds q in the lines and goes to the first match at or below the top of the view.
func (p *logPane) search(q string) {
	p.query = strings.ToLower(q)
	p.matches, p.match = nil, -1
	if p.query != "" {
		for i, l := range p.lines {
			if strings.Contains(strings.ToLower(l.Text), p.query) {
				p.matches = append(p.matches, i)
			}
		}
		if len(p.matches) > 0 {
			p.match = 0
			for i, m := range p.matches {
				if m >= p.vp.YOffset() {
					p.match = i
					break
				}
			}
			p.follow = false
		}
	}
	p.redraw()
	p.show()
}

// next goes to the next match (delta 1) or the previous one (-1), round the end.
func (p *logPane) next(delta int) {
	if len(p.matches) == 0 {
		return
	}
	old := p.matches[p.match]
	p.match = (p.match + delta + len(p.matches)) % len(p.matches)
	p.follow = false
	p.display[old] = p.render(old)
	p.display[p.matches[p.match]] = p.render(p.matches[p.match])
	p.sync()
	p.show()
}

// show scrolls the current match into view.
func (p *logPane) show() {
	if p.match < 0 || p.match >= len(p.matches) {
		return
	}
	line := p.matches[p.match]
	if y := p.vp.YOffset(); line < y || line >= y+p.vp.Height() {
		p.vp.SetYOffset(max(line-p.vp.Height()/3, 0))
	}
}

// status is the pane's line in the status bar.
func (p *logPane) status() string {
	var parts []string
	if p.follow {
		parts = append(parts, "follow on")
	} else {
		parts = append(parts, "follow off")
	}
	if p.timestamps {
		parts = append(parts, "timestamps on")
	} else {
		parts = append(parts, "timestamps off")
	}
	if p.query != "" {
		if len(p.matches) == 0 {
			parts = append(parts, fmt.Sprintf("/%s: no match", p.query))
		} else {
			parts = append(parts, fmt.Sprintf("/%s: %d of %d", p.query, p.match+1, len(p.matches)))
		}
	}
	parts = append(parts, fmt.Sprintf("%d lines", len(p.lines)))
	switch {
	case p.err != nil:
	case p.ended:
		parts = append(parts, "log ended")
	}
	return strings.Join(parts, " · ")
}

// title names what the pane shows.
func (p *logPane) title() string {
	s := fmt.Sprintf("Logs %s/%s · %s", p.namespace, p.pod, p.container)
	if p.previous {
		s += " · previous container"
	}
	return s
}

// View draws the replica list (side) beside the log.
func (p logPane) View(replicas []*kube.Replica) string {
	body := p.vp.View()
	if len(p.lines) == 0 {
		msg := "waiting for log lines…"
		switch {
		case p.err != nil:
			msg = "no log: see the status line"
		case p.ended:
			msg = "the log is empty"
		}
		body = lipgloss.NewStyle().Width(p.vp.Width()).Height(p.vp.Height()).Render(p.st.dim.Render(msg))
	}
	if !p.side {
		return body
	}
	lines := []string{p.st.tableHeader.Render(fit(" REPLICAS", sideWidth))}
	cur := 0
	for i, r := range replicas {
		if r.Name == p.pod {
			cur = i
		}
	}
	rows := p.height - 1
	start := clamp(cur-rows/2, 0, max(len(replicas)-rows, 0))
	for i := start; i < len(replicas) && len(lines) < p.height; i++ {
		r := replicas[i]
		label := fit(fmt.Sprintf(" %s %s", r.Type, index(r.Index)), sideWidth)
		if r.Name == p.pod {
			label = p.st.selected.Render(label)
		}
		lines = append(lines, label)
	}
	for len(lines) < p.height {
		lines = append(lines, strings.Repeat(" ", sideWidth))
	}
	sep := strings.TrimSuffix(strings.Repeat("│\n", p.height), "\n")
	return lipgloss.JoinHorizontal(lipgloss.Top, strings.Join(lines, "\n"), p.st.dim.Render(sep), body)
}
