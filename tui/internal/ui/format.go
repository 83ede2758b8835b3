package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"k8s.io/apimachinery/pkg/util/duration"
)

// age says how old something created at t is at now, as kubectl does ("41s", "3h5m", "2d"),
// except that from 2 to 10 minutes it shows whole minutes ("5m", where kubectl says "5m30s"):
// then no age on screen changes more than once a minute after its first two, and a screen
// where nothing else happens stays still. "-" when t is unknown.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d >= 2*time.Minute && d < 10*time.Minute {
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return duration.HumanDuration(d)
}

// ageStep is how long an age string keeps its value at most, at age d.
func ageStep(d time.Duration) time.Duration {
	switch {
	case d < 2*time.Minute:
		return time.Second
	case d < 8*time.Hour:
		return time.Minute
	case d < 8*24*time.Hour:
		return time.Hour
	}
	return 24 * time.Hour
}

// nextAgeChange is how long until the age of something created at t, shown at now, reads
// differently. The clock ticks only then, so an idle screen does no work.
func nextAgeChange(now, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	d := now.Sub(t)
	if d < 0 {
		return -d
	}
	step := ageStep(d)
	return step - d%step
}

// width is the cells s takes on screen; plain ASCII, the common case, is counted without
// parsing.
func width(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x7f || c < 0x20 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// fit cuts s to width cells (with an ellipsis) or pads it with spaces to width.
func fit(s string, n int) string {
	if n <= 0 {
		return ""
	}
	w := width(s)
	if w > n {
		return ansi.Truncate(s, n, "…")
	}
	return s + strings.Repeat(" ", n-w)
}

// fitRight is fit, aligned right.
func fitRight(s string, n int) string {
	if n <= 0 {
		return ""
	}
	w := width(s)
	if w > n {
		return ansi.Truncate(s, n, "…")
	}
	return strings.Repeat(" ", n-w) + s
}

// oneLine keeps a message on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// wrap breaks s into lines of at most width cells, at spaces (or slashes) where it can.
func wrap(s string, width int) []string {
	if width <= 0 {
		return nil
	}
	return strings.Split(ansi.Wrap(s, width, "/"), "\n")
}
