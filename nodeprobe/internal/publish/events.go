package publish

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event reasons, on the ConfigMap.
const (
	// ReasonPublished: accelerators.yaml now holds another layout (or its first).
	ReasonPublished = "DriverConfigPublished"
	// ReasonConflict: GPU nodes report different layouts, and which ones changed.
	ReasonConflict = "DriverLayoutConflict"
	// ReasonDegraded: a node's probe met problems; the note says what they are and whether
	// its layout was recorded.
	ReasonDegraded = "DegradedDriverProbe"
)

// event records what a write changed, as events on the ConfigMap: kubectl describe shows them
// beside the data. Only changes are recorded (a new published layout, a new set of conflicting
// layouts), not every probe, so a steady cluster records nothing. A failed event is logged and
// forgotten: the ConfigMap itself already says everything.
func (p *Publisher) event(ctx context.Context, node string, ch change) {
	if ch.after.Published != "" && ch.after.Published != ch.before.Published {
		p.emit(ctx, node, ch, corev1.EventTypeNormal, ReasonPublished,
			fmt.Sprintf("accelerators.yaml now holds driver layout %s (reported by %s)", ch.after.Published, join(ch.after.Layouts[ch.after.Published].Nodes)))
	}
	if ch.conflict && !slices.Equal(ch.before.ids(), ch.after.ids()) {
		p.emit(ctx, node, ch, corev1.EventTypeWarning, ReasonConflict,
			fmt.Sprintf("GPU nodes report %d driver layouts: %s; published: %s. See conflicts.yaml.",
				len(ch.after.Layouts), ch.after.summary(), ch.after.Published))
	}
}

func (p *Publisher) degradedEvent(ctx context.Context, r Report, ch change) {
	outcome := "its layout " + LayoutID(r.Finding.Config) + " is recorded: it mounts no fewer driver files than " + KeyConfig
	if ch.held != "" {
		outcome = "not published: " + ch.held
	}
	p.emit(ctx, r.Node, ch, corev1.EventTypeWarning, ReasonDegraded,
		fmt.Sprintf("%s; node %s: %s", outcome, r.Node, strings.Join(r.Finding.Warnings, "; ")))
}

func (p *Publisher) emit(ctx context.Context, node string, ch change, typ, reason, note string) {
	if len(note) > 1000 { // the API's limit is 1 kB
		note = note[:997] + "..."
	}
	ev := &eventsv1.Event{
		// Named as client-go's recorders name events: the object's name and a timestamp.
		ObjectMeta:          metav1.ObjectMeta{Namespace: p.Namespace, Name: fmt.Sprintf("%s.%x", p.Name, time.Now().UnixNano())},
		EventTime:           metav1.NowMicro(),
		ReportingController: "mlkube.io/nodeprobe",
		ReportingInstance:   "nodeprobe-" + node,
		Action:              "Publish",
		Reason:              reason,
		Type:                typ,
		Note:                note,
		Regarding: corev1.ObjectReference{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: p.Namespace, Name: p.Name,
			UID: ch.cm.UID, ResourceVersion: ch.cm.ResourceVersion,
		},
		Related: &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node},
	}
	if err := p.Client.Create(ctx, ev); err != nil {
		p.Log.Error(err, "cannot record event", "reason", reason)
	}
}

func join(nodes []string) string {
	if len(nodes) > 10 {
		return fmt.Sprintf("%v and %d more", nodes[:10], len(nodes)-10)
	}
	return fmt.Sprint(nodes)
}
