package main

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// replicaLogs are the logs of replicas that run as goroutines, by the label a test gives each;
// a test that fails shows them all.
type replicaLogs struct {
	mu   sync.Mutex
	logs map[string]*syncBuffer
}

func newReplicaLogs(t *testing.T) *replicaLogs {
	l := &replicaLogs{logs: map[string]*syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			for label, log := range l.logs {
				t.Logf("--- %s\n%s", label, log.String())
			}
		}
	})
	return l
}

// add starts the log of a replica labelled label, replacing any it had.
func (l *replicaLogs) add(label string) *syncBuffer {
	log := &syncBuffer{}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs[label] = log
	return log
}

func (l *replicaLogs) log(label string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logs[label].String()
}

// listenLoopback opens a listener on a free loopback port, closed when the test ends.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// wantInLog fails the test when log, labelled label, lacks any of wants.
func wantInLog(t *testing.T, label, log string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(log, want) {
			t.Errorf("%s log lacks %q:\n%s", label, want, log)
		}
	}
}
