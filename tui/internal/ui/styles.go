package ui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// styles are every style the dashboard draws with. Without colour (--no-color, NO_COLOR) they
// use only bold, underline and reverse video, so the cursor and matches stay visible.
type styles struct {
	bar         lipgloss.Style // the top line
	title       lipgloss.Style
	section     lipgloss.Style
	dim         lipgloss.Style
	tableHeader lipgloss.Style
	selected    lipgloss.Style
	err         lipgloss.Style
	warn        lipgloss.Style
	ok          lipgloss.Style
	flash       lipgloss.Style
	match       lipgloss.Style
	current     lipgloss.Style // the match n and N move to
	link        lipgloss.Style
	help        help.Styles
}

func newStyles(noColor bool) styles {
	s := lipgloss.NewStyle
	if noColor {
		plain := s()
		return styles{
			bar:         s().Reverse(true),
			title:       s().Bold(true),
			section:     s().Bold(true),
			dim:         plain,
			tableHeader: s().Bold(true),
			selected:    s().Reverse(true),
			err:         s().Bold(true),
			warn:        s().Bold(true),
			ok:          plain,
			flash:       s().Bold(true),
			match:       s().Underline(true),
			current:     s().Reverse(true),
			link:        s().Underline(true),
			help: help.Styles{
				Ellipsis: plain, ShortKey: s().Bold(true), ShortDesc: plain, ShortSeparator: plain,
				FullKey: s().Bold(true), FullDesc: plain, FullSeparator: plain,
			},
		}
	}
	c := lipgloss.Color
	h := help.DefaultDarkStyles()
	h.ShortKey = s().Foreground(c("#5fafd7")).Bold(true)
	h.FullKey = h.ShortKey
	h.ShortDesc = s().Foreground(c("#a8a8a8"))
	h.FullDesc = h.ShortDesc
	return styles{
		bar:         s().Foreground(c("#ffffff")).Background(c("#005f87")).Bold(true),
		title:       s().Foreground(c("#5fafd7")).Bold(true),
		section:     s().Foreground(c("#d7af5f")).Bold(true),
		dim:         s().Foreground(c("#8a8a8a")),
		tableHeader: s().Foreground(c("#ffffff")).Bold(true),
		selected:    s().Foreground(c("#000000")).Background(c("#5fd7ff")),
		err:         s().Foreground(c("#ff5f5f")).Bold(true),
		warn:        s().Foreground(c("#ffaf00")),
		ok:          s().Foreground(c("#87d787")),
		flash:       s().Foreground(c("#ffd75f")),
		match:       s().Foreground(c("#000000")).Background(c("#d7d75f")),
		current:     s().Foreground(c("#000000")).Background(c("#ff8700")).Bold(true),
		link:        s().Foreground(c("#5fafd7")).Underline(true),
		help:        h,
	}
}

// stateStyle colours a job's state.
func (s styles) stateStyle(state string) lipgloss.Style {
	switch state {
	case "Failed":
		return s.err
	case "Succeeded":
		return s.ok
	case "Waiting":
		return s.warn
	}
	return lipgloss.NewStyle()
}
