package ui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// progressCell is the job's PROGRESS in the list: status.progress.summary ("42%", "step 120"),
// then "stalled" while its Progressing condition says so; "" when its trainers never reported.
func progressCell(j *kube.Job) string {
	s := ""
	if j.Progress != nil {
		s = j.Progress.Summary
	}
	if stalled(j) != nil {
		s = strings.TrimSpace(s + " stalled")
	}
	return s
}

// stalled is the job's Progressing condition when it says the job stalled (no larger step within
// runPolicy.progressDeadlineSeconds); nil otherwise.
func stalled(j *kube.Job) *kube.Condition {
	for i := range j.Conditions {
		if c := &j.Conditions[i]; jobwatch.Stalled(c.Type, c.Status, c.Reason) {
			return c
		}
	}
	return nil
}

// progressLines show how far the job's trainers are: step and epoch of their totals, percent and
// time left; every metric of the last report; when it came and from which pod. A stalled job's
// progress is in the warning style, with the condition's message. None for a job whose trainers
// never reported and that did not stall.
func (m Model) progressLines(job *kube.Job) []string {
	if job == nil {
		return nil
	}
	stall, p := stalled(job), job.Progress
	if p == nil && stall == nil {
		return nil
	}
	const label = " Progress     "
	var out []string
	add := m.labelled(label, &out)
	w := max(m.width-len(label), 10)
	style := lipgloss.NewStyle()
	if stall != nil {
		style = m.st.warn
	}
	if p == nil {
		add(style.Render("no report from the trainers"))
	}
	addJoined(add, jobwatch.ProgressWords(p), w, style)
	addJoined(add, jobwatch.MetricWords(p), w, lipgloss.NewStyle())
	if stall != nil {
		add(m.st.warn.Render("stalled: " + oneLine(stall.Message)))
	}
	addJoined(add, m.reportAbout(job), w, m.st.dim)
	return out
}

// addJoined adds parts joined with " · ", in lines of at most w cells broken between parts;
// nothing for no parts.
func addJoined(add func(string), parts []string, w int, style lipgloss.Style) {
	if len(parts) == 0 {
		return
	}
	for _, l := range joinWrap(parts, " · ", w) {
		add(style.Render(l))
	}
}

// reportAbout is what is known of the last report: how long ago it came, from which pod, the
// step rate; and how many times the job stalled.
func (m Model) reportAbout(job *kube.Job) []string {
	var parts []string
	if p := job.Progress; p != nil {
		if !p.ReportTime.IsZero() {
			parts = append(parts, "reported "+age(m.now, p.ReportTime.Time)+" ago")
		}
		if p.Replica != "" {
			parts = append(parts, "by "+p.Replica)
		}
		if p.StepsPerSecond != "" {
			parts = append(parts, p.StepsPerSecond+" steps/s")
		}
	}
	if job.Stalls > 0 {
		parts = append(parts, fmt.Sprintf("stalls %d", job.Stalls))
	}
	return parts
}

// lastWordsShown is how many of a failed replica's last lines the job's view shows: the end,
// where the error is, while the replicas keep their rows on 24 lines.
const lastWordsShown = 5

// firstFailureLines name the replica that failed first (status.firstFailure), the cause where
// the others failed after it: replica, pod and node, its exit as the operator judged it, and the
// end of its last words. None when the job names none.
func (m Model) firstFailureLines(job *kube.Job) []string {
	if job == nil || job.FirstFailure == nil {
		return nil
	}
	f := job.FirstFailure
	const label = " First failure  "
	var out []string
	add := m.labelled(label, &out)
	w := max(m.width-len(label), 10)
	var where []string
	for _, s := range []string{f.Replica, prefixed("pod ", f.Pod), prefixed("node ", f.Node)} {
		if s != "" {
			where = append(where, s)
		}
	}
	addJoined(add, where, w, lipgloss.NewStyle())
	add(m.st.err.Render(jobwatch.FailureExit(f)))
	words := jobwatch.LastWords(f)
	if len(words) == 0 {
		return out
	}
	head := "last words:"
	if len(words) > lastWordsShown {
		head = fmt.Sprintf("last words (the last %d of %d lines):", lastWordsShown, len(words))
		words = words[len(words)-lastWordsShown:]
	}
	add(m.st.dim.Render(head))
	for _, l := range words {
		// One screen line each, cut rather than wrapped: a trace reads line by line.
		add("  " + ansi.Truncate(plainText(l), w-2, "…"))
	}
	return out
}

// plainText is a line a container printed, made safe to draw: its escape sequences and control
// characters out, tabs as spaces.
func plainText(s string) string {
	s = strings.ReplaceAll(ansi.Strip(s), "\t", "    ")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
