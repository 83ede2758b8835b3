package ui

import (
	"strings"

	"charm.land/lipgloss/v2"
)

// column describes a table column. Its width is the widest of its title and cells, kept
// within [min, max] (max 0: no bound). When the columns do not fit, those with the highest
// shrink give up width first, down to min; shrink 0 never does.
type column struct {
	title  string
	min    int
	max    int
	shrink int
	right  bool
}

// table is a k9s-style table: a header, then the rows that fit, with a cursor row that stays
// in view. It keeps the rows as strings and draws only the visible ones, so a list of
// thousands costs no more to draw than a screenful. (bubbles/table draws twice the height
// through Lip Gloss on every change and can scroll the cursor out of view after SetCursor,
// which a live list that re-sorts under the cursor does all the time.)
type table struct {
	cols     []column
	widths   []int
	rows     [][]string
	cursor   int // -1: no cursor (a list to read, not to move in)
	offset   int // first visible row
	height   int // visible rows, not counting the header
	width    int
	header   lipgloss.Style
	selected lipgloss.Style
}

func newTable(cols []column, st styles, withCursor bool) table {
	t := table{cols: cols, header: st.tableHeader, selected: st.selected}
	if !withCursor {
		t.cursor = -1
	}
	return t
}

func (t *table) setSize(w, h int) {
	if w == t.width && max(h, 0) == t.height {
		return // the layout is the same: every update sizes the tables
	}
	t.width, t.height = w, max(h, 0)
	t.layout()
	t.scroll()
}

func (t *table) setRows(rows [][]string) {
	t.rows = rows
	if t.cursor >= 0 {
		t.cursor = clamp(t.cursor, 0, max(len(rows)-1, 0))
	}
	t.layout()
	t.scroll()
}

func (t *table) setCursor(i int) {
	if t.cursor < 0 {
		return
	}
	t.cursor = clamp(i, 0, max(len(t.rows)-1, 0))
	t.scroll()
}

// visible is the range of rows on screen: [lo, hi).
func (t *table) visible() (lo, hi int) {
	return t.offset, min(t.offset+t.height, len(t.rows))
}

func (t *table) move(delta int) { t.setCursor(t.cursor + delta) }

// scroll keeps the cursor in view, moving the window as little as it can.
func (t *table) scroll() {
	if t.cursor < 0 {
		t.offset = 0
		return
	}
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.height > 0 && t.cursor >= t.offset+t.height {
		t.offset = t.cursor - t.height + 1
	}
	t.offset = clamp(t.offset, 0, max(len(t.rows)-t.height, 0))
}

// layout sizes the columns to their content and the width.
func (t *table) layout() {
	n := len(t.cols)
	t.widths = make([]int, n)
	for i, c := range t.cols {
		w := width(c.title)
		for _, r := range t.rows {
			if i < len(r) {
				w = max(w, width(r[i]))
			}
		}
		if c.max > 0 {
			w = min(w, c.max)
		}
		t.widths[i] = max(w, c.min)
	}
	avail := t.width - n // a space before every column
	total := 0
	for _, w := range t.widths {
		total += w
	}
	// Too wide: take from the columns that shrink first, down to their minimum.
	for total > avail {
		best := -1
		for i, c := range t.cols {
			if c.shrink > 0 && t.widths[i] > c.min && (best < 0 || c.shrink > t.cols[best].shrink ||
				c.shrink == t.cols[best].shrink && t.widths[i] > t.widths[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		t.widths[best]--
		total--
	}
	// Still too wide: the rightmost columns are cut.
	for i := n - 1; i >= 0 && total > avail; i-- {
		cut := min(t.widths[i], total-avail)
		t.widths[i] -= cut
		total -= cut
	}
}

func (t table) line(cells []string) string {
	var b strings.Builder
	for i, w := range t.widths {
		if w <= 0 {
			continue
		}
		cell := ""
		if i < len(cells) {
			cell = cells[i]
		}
		b.WriteByte(' ')
		if t.cols[i].right {
			b.WriteString(fitRight(cell, w))
		} else {
			b.WriteString(fit(cell, w))
		}
	}
	return fit(b.String(), t.width)
}

// View draws the header and the visible rows: 1+height lines, or fewer when there are fewer
// rows.
func (t table) View() string {
	titles := make([]string, len(t.cols))
	for i, c := range t.cols {
		titles[i] = c.title
	}
	lines := []string{t.header.Render(t.line(titles))}
	end := min(t.offset+t.height, len(t.rows))
	for i := t.offset; i < end; i++ {
		l := t.line(t.rows[i])
		if i == t.cursor {
			l = t.selected.Render(l)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }
