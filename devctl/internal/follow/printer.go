package follow

import (
	"fmt"
	"hash/fnv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// palette holds the ANSI colours replicas get, in spec order: no red (errors look red) and no
// black or white (one of them is the terminal's background).
var palette = []string{"36", "32", "33", "35", "34", "96", "92", "93", "95", "94"}

// A Printer formats the replica column: names padded to one width, so that the text after
// them lines up, and, for a terminal, each replica in its own colour.
type Printer struct {
	// job stands in the replica column of lines about the job itself: its kind, "tfjob".
	job                  string
	width                int
	logColor, stateColor bool
	colors               map[string]string
}

// NewPrinter makes the Printer for a job's replicas; logColor colours the log lines' prefixes,
// stateColor the names in state lines (each when its output is a terminal).
func NewPrinter(job client.Object, logColor, stateColor bool) *Printer {
	label := v1beta1.Kinds[0].Label()
	if k := KindOf(job); k != nil {
		label = k.Label()
	}
	p := &Printer{job: label, width: len(label), logColor: logColor, stateColor: stateColor, colors: map[string]string{}}
	for i, name := range ReplicaNames(job) {
		p.width = max(p.width, len(name))
		p.colors[name] = palette[i%len(palette)]
	}
	return p
}

// pad returns name padded to the column's width, coloured when color.
func (p *Printer) pad(name string, color bool) string {
	padded := name + strings.Repeat(" ", max(0, p.width-len(name)))
	if !color {
		return padded
	}
	code, ok := p.colors[name]
	if !ok {
		if name == p.job {
			code = "1" // bold
		} else {
			h := fnv.New32a()
			h.Write([]byte(name))
			code = palette[h.Sum32()%uint32(len(palette))]
		}
	}
	return "\x1b[" + code + "m" + padded + "\x1b[0m"
}

// LogLine is one line of a replica's log as printed: "worker-1 | text".
func (p *Printer) LogLine(replica, text string) string {
	return p.pad(replica, p.logColor) + " | " + text + "\n"
}

// JobLabel stands in the replica column of lines about the job itself: its kind, "tfjob" or
// "mxjob".
func (p *Printer) JobLabel() string { return p.job }

// StateLine is one line about a replica or, with JobLabel, the job: "master-0  Pending -> Running".
func (p *Printer) StateLine(name, format string, args ...any) string {
	return p.pad(name, p.stateColor) + "  " + fmt.Sprintf(format, args...) + "\n"
}
