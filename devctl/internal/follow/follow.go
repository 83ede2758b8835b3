// Package follow follows a job, of any kind of the table, while it runs: each change of the
// job's status and of its replicas' states as one line ("worker-1  Running -> Failed (exit code
// 137, Error)"), and the logs of every replica, interleaved, each line prefixed with its replica
// ("worker-1 | ..."), and the trainers' progress (status.progress): one line redrawn in place at
// the bottom of a terminal (LiveLine), else a line when it changes, at most one per 10 s.
// Everything comes from watches (informers on the job and on its pods) and
// from following log streams, both internal/jobwatch's, which the dashboard sees with too;
// nothing polls. A recreated pod (new UID) or a container restarted in place is a new run whose
// log is read from its start; a run's log is read once, so no line is repeated.
package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Options say what to follow and where to print it.
type Options struct {
	Config *rest.Config
	// Scheme knows the job kinds and the core types.
	Scheme *runtime.Scheme
	// Job is the job to follow, of any kind of the kinds table, as created or read: its
	// namespace, name, UID and spec.
	Job client.Object
	// MatchUID follows this instance of the job only (Job.UID): its pods, and its end. Without
	// it, whatever job has the name, and the pods that one controls. Either way a pod is the
	// job's by its controller owner reference, never by its labels alone.
	MatchUID bool

	// States prints every change of the job's status and of its replicas to Status.
	States bool
	Status io.Writer
	// Logs, when set, streams the replicas' logs to Out.
	Logs jobwatch.LogSource
	Out  io.Writer
	// Replica, when set, limits the logs to that replica ("worker-1").
	Replica string
	// Printer formats the replica column; nil means plain (no colour).
	Printer *Printer
	// Live, when set, is the line at the bottom of the terminal the trainers' progress
	// (status.progress, ProgressLine) is drawn on in place, with States; Status and Out write
	// through it (LiveLine.Writer) so that their lines go above it. Without it the progress is a
	// state line when it changes, at most one per ProgressEvery, and the last one at the end.
	Live *LiveLine
	// ProgressEvery is the least time between two progress lines without Live; default
	// DefaultProgressEvery.
	ProgressEvery time.Duration

	// Start is when the job was submitted: "all replicas have started" counts from it. Zero
	// means when Follow started.
	Start time.Time
	// Window is how long log lines are held to be put in order (Merger); default 200ms.
	Window time.Duration
	// Drain bounds how long, once the job has ended, Follow waits for the last log lines
	// (parameter servers being stopped, say); default 5s.
	Drain time.Duration
	// Hint, when set, is how long a job may go without any status before Follow says that the
	// operator may not be running.
	Hint time.Duration
	// PendingTimeout, when set, is how long the job may stay Waiting (on a reason its user must
	// act on: an image no one can pull, no node that fits) before Follow gives up on it.
	PendingTimeout time.Duration
	// WaitingHint, when set, says what to do about the reason a job waits (its Running
	// condition); "" when it has nothing to add. Its line follows the reason's.
	WaitingHint func(c metav1.Condition) string
}

// Result is how following ended.
type Result struct {
	// Job is the job as last seen, of the kind of Options.Job.
	Job client.Object
	// Ended: the job succeeded or failed. Deleted: it was deleted before it ended.
	Ended, Deleted bool
	// AllStarted is how long after Start every replica had started; zero when that never
	// happened (a replica finished before another began, or the job ended first).
	AllStarted time.Duration
	// GaveUp is the Running condition the job waited on for PendingTimeout, when Follow gave up
	// on it; nil otherwise.
	GaveUp *metav1.Condition
	// Unreadable says why the job became unreadable while followed (v1beta1.Job.Unreadable):
	// following stopped there, with an error that says so.
	Unreadable string
}

// Follow follows the job until it ends or is deleted, or ctx ends (then it returns ctx's error
// with what it saw so far). Once the job has ended it waits up to Drain for the logs of
// replicas that are still finishing.
func Follow(ctx context.Context, o Options) (*Result, error) {
	kind := KindOf(o.Job)
	if kind == nil {
		return nil, fmt.Errorf("cannot follow a %T: devctl follows jobs of the kinds %s", o.Job, v1beta1.KindNames("and"))
	}
	if o.Printer == nil {
		o.Printer = NewPrinter(o.Job, false, false)
	}
	if o.Start.IsZero() {
		o.Start = time.Now()
	}
	if o.Window == 0 {
		o.Window = 200 * time.Millisecond
	}
	if o.Drain == 0 {
		o.Drain = 5 * time.Second
	}
	if o.Status == nil {
		o.Status = io.Discard
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = DefaultProgressEvery
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan event, 1024)
	c, err := watchJob(ctx, o, events)
	if err != nil {
		return nil, err
	}

	f := &follower{
		o:        o,
		kind:     kind,
		events:   events,
		jobs:     newJobTracker(),
		replicas: newReplicaTracker(),
		names:    ReplicaNames(o.Job),
		streams:  map[jobwatch.Run]*streamInfo{},
		later:    map[types.UID]*corev1.Pod{},
		res:      &Result{Job: o.Job},
		progress: progressLines{every: o.ProgressEvery},
	}
	var mu sync.Mutex
	f.write = func(w io.Writer, s string) {
		mu.Lock()
		defer mu.Unlock()
		io.WriteString(w, s)
	}
	// State lines go through the merger too, stamped with the time they were seen: a replica's
	// last log lines then come before the line that says it exited.
	f.merger = &Merger{
		Window:   o.Window,
		Out:      writerFunc(func(p []byte) (int, error) { f.write(o.Out, string(p)); return len(p), nil }),
		StateOut: writerFunc(func(p []byte) (int, error) { f.write(o.Status, string(p)); return len(p), nil }),
		Format:   func(l Line) string { return o.Printer.LogLine(l.Replica, l.Text) },
	}
	stopMerger := make(chan struct{})
	mergerDone := make(chan struct{})
	go func() { f.merger.Run(stopMerger); close(mergerDone) }()

	streamCtx, stopStreams := context.WithCancel(ctx)
	f.streamCtx = streamCtx
	defer func() {
		stopStreams()
		f.wg.Wait()
		f.lastProgress()
		close(stopMerger)
		<-mergerDone
		if o.Live != nil {
			o.Live.Keep() // below the last lines
		}
	}()

	// The job may be gone already (deleted between its creation and now).
	job := kind.New()
	err = c.Get(ctx, client.ObjectKeyFromObject(o.Job), job)
	if apierrors.IsNotFound(err) || (err == nil && o.MatchUID && job.GetUID() != o.Job.GetUID()) {
		f.res.Deleted = true
		return f.res, nil
	}
	if err != nil {
		return f.res, err
	}
	// An unreadable job ends the following with its first event (onJob), as one that becomes
	// so does.
	f.res.Job = job
	return f.run(ctx)
}

// event is one change from the watches: the job or a pod, as it is now or as it was when
// deleted; or a log stream that ended; or a broken stream asking whether to open it again.
type event struct {
	job     client.Object
	pod     *corev1.Pod
	deleted bool
	end     *streamEnd
	again   *again
}

// streamInfo is what the loop knows of the stream of one run's log: whether it is being read.
// A run's log is read once: a run with an entry is never opened again.
type streamInfo struct {
	active  bool
	replica string
}

type follower struct {
	o        Options
	kind     *v1beta1.Kind
	events   chan event
	jobs     *jobTracker
	replicas *replicaTracker
	names    []string
	// later holds, without MatchUID, the pods of a newer job of the name that came before
	// the job itself did: they are taken up when it comes.
	later  map[types.UID]*corev1.Pod
	merger *Merger
	write  func(io.Writer, string)
	res    *Result

	streamCtx context.Context
	wg        sync.WaitGroup
	streams   map[jobwatch.Run]*streamInfo

	allStartedSaid bool
	ending         bool
	settled        bool

	// progress picks the progress lines without Live; progressDue is when a change that waits
	// for its turn may be said.
	progress    progressLines
	progressDue <-chan time.Time
}

func (f *follower) run(ctx context.Context) (*Result, error) {
	var hint, settle, drain, pending, waitSettled <-chan time.Time
	if f.o.Hint > 0 {
		hint = time.After(f.o.Hint)
	}
	waiting := false
	for {
		// The clock of --pending-timeout runs while the job is Waiting, and starts again when
		// it waits anew.
		if now := f.res.Job != nil && StatusOf(f.res.Job).State == v1beta1.JobStateWaiting; now != waiting {
			waiting, pending = now, nil
			if now && f.o.PendingTimeout > 0 {
				pending = time.After(f.o.PendingTimeout)
			}
		}
		select {
		case <-ctx.Done():
			return f.res, ctx.Err()
		case <-pending:
			f.sayWaiting()
			f.res.GaveUp = Condition(f.res.Job, v1beta1.JobRunning)
			return f.res, nil
		case <-waitSettled:
			f.sayWaiting()
		case <-hint:
			if StatusOf(f.res.Job).Phase == "" {
				f.state(f.o.Printer.JobLabel(), "no status after %s: is the operator running? (devctl status)", f.o.Hint)
			}
		case <-settle:
			f.settled = true
		case <-f.progressDue:
			f.progressDue = nil
			f.showProgress(f.progress.pending)
		case <-drain:
			return f.res, nil
		case e := <-f.events:
			switch {
			case e.job != nil:
				f.onJob(e.job, e.deleted)
				if f.jobs.waiting != "" {
					waitSettled = time.After(waitSettle)
				}
				if f.res.Deleted {
					return f.res, nil
				}
				if f.res.Unreadable != "" {
					return f.res, CannotAct(e.job, "follow")
				}
			case e.pod != nil:
				f.onPod(e.pod, e.deleted)
			case e.end != nil:
				f.onStreamEnd(*e.end)
			case e.again != nil:
				e.again.reply <- f.onAgain(e.again.run)
			}
		}
		if f.ending && settle == nil {
			settle = time.After(min(500*time.Millisecond, f.o.Drain))
			drain = time.After(f.o.Drain)
		}
		if f.settled && f.idle() {
			return f.res, nil
		}
	}
}

// waitSettle is how long the reason a job waits must stay the same before it is said: the
// kubelet meets the same wall for each replica a moment apart.
const waitSettle = 1500 * time.Millisecond

// sayWaiting says why the job waits, if that is yet to be said.
func (f *follower) sayWaiting() {
	line := f.jobs.sayWaiting()
	if line == "" {
		return
	}
	f.state(f.o.Printer.JobLabel(), "%s", line)
	if c := Condition(f.res.Job, v1beta1.JobRunning); c != nil && f.o.WaitingHint != nil {
		if hint := f.o.WaitingHint(*c); hint != "" {
			f.state(f.o.Printer.JobLabel(), "%s", hint)
		}
	}
}

func (f *follower) state(name, format string, args ...any) {
	if f.o.States {
		f.merger.Add(Line{Replica: name, Time: time.Now(), Text: f.o.Printer.StateLine(name, format, args...), State: true})
	}
}

func (f *follower) onJob(job client.Object, deleted bool) {
	if f.o.MatchUID && job.GetUID() != f.o.Job.GetUID() {
		return
	}
	if deleted {
		f.res.Deleted = !f.ending
		f.ending = true
		return
	}
	if why := Unreadable(job); why != "" {
		// Its spec reads as empty: its replicas and its end cannot be told any more.
		f.state(f.o.Printer.JobLabel(), "unreadable: %s", why)
		f.res.Unreadable = why
		return
	}
	newer := job.GetUID() != f.res.Job.GetUID()
	f.res.Job = job
	if newer {
		f.takeUpLater()
	}
	for _, l := range f.jobs.observe(StatusOf(job)) {
		f.state(f.o.Printer.JobLabel(), "%s", l)
	}
	f.showProgress(ProgressLine(StatusOf(job)))
	if Ended(job) {
		f.res.Ended = true
		f.ending = true
	}
}

// showProgress shows the progress line as it is now: drawn in place on Live, else said when it
// changed, and when its turn comes if it must wait (progressLines).
func (f *follower) showProgress(line string) {
	if !f.o.States {
		return
	}
	if f.o.Live != nil {
		if line != "" {
			line = strings.TrimSuffix(f.o.Printer.StateLine(f.o.Printer.JobLabel(), "%s", line), "\n")
		}
		f.o.Live.Set(line)
		return
	}
	say, wait := f.progress.offer(line, time.Now())
	if say != "" {
		f.state(f.o.Printer.JobLabel(), "%s", say)
	}
	if wait > 0 && f.progressDue == nil {
		f.progressDue = time.After(wait)
	}
}

// lastProgress says the change of progress that still waits for its turn as following ends:
// the log ends with where training got.
func (f *follower) lastProgress() {
	if line := f.progress.last(); line != "" && f.o.Live == nil {
		f.state(f.o.Printer.JobLabel(), "%s", line)
	}
}

func (f *follower) onPod(pod *corev1.Pod, deleted bool) {
	replica := ReplicaOf(pod)
	if replica == "" || !f.owns(pod, deleted) {
		return
	}
	for _, l := range f.replicas.observe(replica, pod, deleted) {
		f.state(replica, "%s", l)
	}
	if !f.allStartedSaid && f.replicas.allStarted(f.names) {
		f.allStartedSaid = true
		f.res.AllStarted = time.Since(f.o.Start)
		f.state(f.o.Printer.JobLabel(), "all %d replicas have started (%.1fs)", len(f.names), f.res.AllStarted.Seconds())
	}
	if deleted || f.o.Logs == nil || (f.o.Replica != "" && replica != f.o.Replica) {
		return
	}
	key, follow, ok := jobwatch.Current(pod)
	if !ok {
		return
	}
	if s := f.streams[key]; s != nil {
		return // being read, read, or waiting to be opened again
	}
	f.streams[key] = &streamInfo{replica: replica}
	f.open(key, pod, follow)
}

// owns says whether the job followed controls the pod. The labels that select pods are anyone's
// to set: a pod labelled like one of the job's replicas, made by hand or by another job, is
// not the job's unless its controller owner reference carries the job's UID.
func (f *follower) owns(pod *corev1.Pod, deleted bool) bool {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return false
	}
	if owner.UID == f.res.Job.GetUID() {
		return true
	}
	delete(f.later, pod.UID)
	if !f.o.MatchUID && !deleted && owner.Kind == f.kind.Name && owner.Name == f.o.Job.GetName() {
		f.later[pod.UID] = pod // maybe a newer job of the name, not seen yet
	}
	return false
}

// takeUpLater follows the pods that came before their job, once it has come.
func (f *follower) takeUpLater() {
	var pods []*corev1.Pod
	for uid, p := range f.later {
		if metav1.GetControllerOf(p).UID == f.res.Job.GetUID() {
			pods = append(pods, p)
			delete(f.later, uid)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	for _, p := range pods {
		f.onPod(p, false)
	}
}

func (f *follower) open(key jobwatch.Run, pod *corev1.Pod, follow bool) {
	s := f.streams[key]
	s.active = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		// Whether a broken stream is opened again is the loop's to say: it knows the pods.
		ask := func() (bool, bool) {
			a := &again{run: key, reply: make(chan againReply, 1)}
			f.send(event{again: a})
			select {
			case r := <-a.reply:
				return r.follow, r.ok
			case <-f.streamCtx.Done():
				return false, false
			}
		}
		err := jobwatch.Follow(f.streamCtx, f.o.Logs, pod, follow, ask, func(lines []jobwatch.Line) {
			for _, l := range lines {
				f.merger.Add(logLine(s.replica, l))
			}
		})
		f.send(event{end: &streamEnd{key: key, replica: s.replica, err: err}})
	}()
}

// send hands an event to the loop, unless following has stopped.
func (f *follower) send(e event) {
	select {
	case f.events <- e:
	case <-f.streamCtx.Done():
	}
}

func (f *follower) onStreamEnd(e streamEnd) {
	f.streams[e.key].active = false
	if e.err != nil && f.streamCtx.Err() == nil {
		f.state(e.replica, "cannot read the log any more: %v", e.err)
	}
}

// onAgain says whether a broken stream of run's log is to be opened again: only while run is
// its replica's newest, and whether it is still being written.
func (f *follower) onAgain(run jobwatch.Run) againReply {
	s := f.streams[run]
	pod := f.replicas.pods[s.replica]
	if pod == nil || pod.UID != run.Pod || f.replicas.states[s.replica].Phase == Deleted {
		return againReply{}
	}
	now, follow, ok := jobwatch.Current(pod)
	return againReply{follow: ok && now == run && follow, ok: true}
}

// idle says no log is being read or about to be.
func (f *follower) idle() bool {
	for _, s := range f.streams {
		if s.active {
			return false
		}
	}
	return true
}

// watchJob starts informers on the job (by name) and on its replica pods (by label) that send
// every change to events, and returns a client to read the job once they are in sync.
func watchJob(ctx context.Context, o Options, events chan<- event) (client.Client, error) {
	kind := KindOf(o.Job)
	c, err := client.NewWithWatch(o.Config, client.Options{Scheme: o.Scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	send := func(e event) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	}
	synced := make(chan struct{}, 2)
	ns, name := o.Job.GetNamespace(), o.Job.GetName()
	for _, src := range []jobwatch.Source{jobwatch.Job(c, kind, ns, name), jobwatch.Pods(kube.CoreV1().Pods(ns), kind, name)} {
		handler := func(obj any, deleted bool) {
			switch o := obj.(type) {
			case *corev1.Pod:
				send(event{pod: o, deleted: deleted})
			case client.Object:
				send(event{job: o, deleted: deleted})
			}
		}
		jobwatch.Informer{
			Source: src,
			Upsert: func(obj any) { handler(obj, false) },
			Remove: func(obj any) { handler(obj, true) },
			Synced: func() { synced <- struct{}{} },
		}.Run(ctx)
	}
	timeout := time.After(30 * time.Second)
	for range 2 {
		select {
		case <-synced:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, fmt.Errorf("cannot watch %s and its pods in namespace %s (no answer in 30s)", Ref(o.Job), ns)
		}
	}
	return c, nil
}

type writerFunc func(p []byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// IsInterrupted says err is following stopped by its context.
func IsInterrupted(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
