// Package eventtime reads when an event last happened and how many times, whichever fields its
// reporter filled: an events.k8s.io/v1 series, its eventTime, or the core/v1 lastTimestamp and
// count that older reporters (the kubelet among them) still write. The operator and the
// dashboard read events alike through it.
package eventtime

import (
	"time"

	eventsv1 "k8s.io/api/events/v1"
)

// Last is when ev last happened and how many times it has; the time falls back to the event's
// creation when its reporter set none.
func Last(ev *eventsv1.Event) (time.Time, int32) {
	switch {
	case ev.Series != nil:
		return ev.Series.LastObservedTime.Time, ev.Series.Count
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time, 1
	case !ev.DeprecatedLastTimestamp.IsZero():
		return ev.DeprecatedLastTimestamp.Time, max(ev.DeprecatedCount, 1)
	}
	return ev.CreationTimestamp.Time, 1
}
