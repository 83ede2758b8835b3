package eventtime

import (
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLast(t *testing.T) {
	created := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return created.Add(time.Duration(m) * time.Minute) }
	base := func() eventsv1.Event {
		return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	}
	series := base()
	series.EventTime = metav1.NewMicroTime(at(1))
	series.Series = &eventsv1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(at(9))}
	single := base()
	single.EventTime = metav1.NewMicroTime(at(2))
	legacy := base() // a core/v1 reporter, as the kubelet's FailedMount
	legacy.DeprecatedFirstTimestamp, legacy.DeprecatedLastTimestamp, legacy.DeprecatedCount = metav1.NewTime(at(1)), metav1.NewTime(at(5)), 4
	legacyNoCount := base()
	legacyNoCount.DeprecatedLastTimestamp = metav1.NewTime(at(3))
	for name, tc := range map[string]struct {
		ev    eventsv1.Event
		at    time.Time
		count int32
	}{
		"a series, its last observation":           {series, at(9), 7},
		"one event, its eventTime":                 {single, at(2), 1},
		"a core/v1 event, its lastTimestamp":       {legacy, at(5), 4},
		"a core/v1 event without a count, once":    {legacyNoCount, at(3), 1},
		"no time set: when the event was recorded": {base(), created, 1},
	} {
		if gotAt, gotCount := Last(&tc.ev); !gotAt.Equal(tc.at) || gotCount != tc.count {
			t.Errorf("%s: %s ×%d, want %s ×%d", name, gotAt, gotCount, tc.at, tc.count)
		}
	}
}
