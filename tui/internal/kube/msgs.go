package kube

// Messages a Client sends on its Feed. Those of a job's watch, a log stream or a port-forward
// carry the id the UI gave when it started them, so the UI can drop the last words of one it
// has already left.

// JobUpserted says a job was added or changed.
type JobUpserted struct{ Job *Job }

// JobDeleted says a job is gone.
type JobDeleted struct{ Key JobKey }

// JobsSynced says the job list of a kind is complete: every job that existed when the watch
// started has been sent.
type JobsSynced struct{ Kind string }

// JobsPreview is the first page of a kind's jobs, listed beside its watch: the watch's first
// list of 5,000 jobs comes in whole or not at all, a second or more after start, and this page
// of PreviewPage jobs, with how many there are in all, comes in a fraction of that. The job
// list draws its top rows and its count from it until the kind's JobsSynced, or its list fails.
type JobsPreview struct {
	Kind string
	Jobs []*Job // as the apiserver orders them: by namespace, then name (JobLess)
	// Total counts every job of the kind, those on the page and those after it.
	Total int
	// More is true when jobs come after the page's last.
	More bool
}

// ReplicaUpserted says a replica pod of the watched job was added or changed.
type ReplicaUpserted struct {
	Watch   int
	Replica *Replica
}

// ReplicaDeleted says a replica pod of the watched job is gone.
type ReplicaDeleted struct {
	Watch int
	Name  string
}

// EventUpserted says an event about the watched job was recorded or updated.
type EventUpserted struct {
	Watch int
	Event *Event
}

// EventDeleted says an event about the watched job expired.
type EventDeleted struct {
	Watch int
	Name  string
}

// ReplicasSynced says the watched job's pods and events are all in.
type ReplicasSynced struct{ Watch int }

// WatchFailed says a list or watch failed; Err says what to do about it. The watch keeps
// retrying, and sends WatchOK once it works again.
type WatchFailed struct {
	Watch  int    // the job watch it belongs to; 0 for the job list
	Source string // what failed, e.g. "tfjobs.mlkube.io in namespace team-a"
	Kind   string // the job kind whose list failed; empty for a job's pods and events
	Err    error
}

// WatchOK says a source that failed works again.
type WatchOK struct {
	Watch  int
	Source string
}

// LogLine is one line of a container's log.
type LogLine struct {
	Time string // RFC 3339 with nanoseconds, as the kubelet wrote it; empty when missing
	Text string
}

// LogLines are new lines of a log stream.
type LogLines struct {
	Stream int
	Lines  []LogLine
}

// LogEnded says a log stream is over: the container stopped, or Err.
type LogEnded struct {
	Stream int
	Err    error
}

// PortForwardReady says a port-forward to TensorBoard listens on LocalURL.
type PortForwardReady struct {
	ID       int
	Pod      string
	LocalURL string
}

// PortForwardFailed says a port-forward could not start, or broke.
type PortForwardFailed struct {
	ID  int
	Err error
}
