package kube

import (
	"context"
	"sync"
	"time"
)

// Batch is every message that arrived since the previous batch, and when it was handed over.
// The UI applies a whole batch and then draws once.
type Batch struct {
	At   time.Time
	Msgs []any
}

// Feed carries messages from watches, log streams and port-forwards to the UI. It coalesces
// bursts: a message that arrives after a quiet spell is handed over at once, and the ones that
// follow within Window of a hand-over wait for the next one, so the UI draws at most once per
// Window however many objects change.
type Feed struct {
	Window time.Duration

	mu      sync.Mutex
	pending []any
	last    time.Time
	wake    chan struct{}
}

// NewFeed makes a feed that coalesces within window.
func NewFeed(window time.Duration) *Feed {
	return &Feed{Window: window, wake: make(chan struct{}, 1)}
}

// Send queues a message; it never blocks.
func (f *Feed) Send(msg any) {
	f.mu.Lock()
	f.pending = append(f.pending, msg)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Next waits for messages and returns them as one batch; ok is false once ctx is done.
func (f *Feed) Next(ctx context.Context) (b Batch, ok bool) {
	for {
		select {
		case <-ctx.Done():
			return Batch{}, false
		case <-f.wake:
		}
		if wait := f.Window - time.Since(f.last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return Batch{}, false
			case <-t.C:
			}
		}
		f.mu.Lock()
		msgs := f.pending
		f.pending = nil
		f.mu.Unlock()
		if len(msgs) == 0 {
			continue
		}
		f.last = time.Now()
		return Batch{At: f.last, Msgs: msgs}, true
	}
}
