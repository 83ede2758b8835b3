package tui_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/tui/internal/kube"
	"github.com/mlkube/mlkube/tui/internal/ui"
)

// These tests drive the model the way the program does, through messages: key presses, and
// batches like those the watches send. Goldens are the screen as text (testdata/*.golden;
// `go test ./tui -run View -update` rewrites them).

var t0 = time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)

var target = kube.Target{Context: "kind-mlkube", Server: "https://127.0.0.1:6443", Namespace: "team-a"}

func newModel(t kube.Target) ui.Model {
	return ui.New(ui.Config{Target: t, Kinds: kube.Kinds, NoColor: true, Now: t0, FrozenClock: true})
}

func at(d time.Duration, msgs ...any) kube.Batch { return kube.Batch{At: t0.Add(d), Msgs: msgs} }

// kindsTitle is how the job list's title names the kinds: "TfJob · MXJob · ...".
func kindsTitle() string {
	var names []string
	for _, k := range kube.Kinds {
		names = append(names, k.Name)
	}
	return strings.Join(names, " · ")
}

func key(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

// keys presses each key of s.
func keys(s string) []any {
	var out []any
	for _, r := range s {
		out = append(out, key(string(r)))
	}
	return out
}

// run sends msgs to the model in a teatest program of w x h, quits, and returns the final
// model.
func run(t *testing.T, m tea.Model, w, h int, msgs ...any) ui.Model {
	t.Helper()
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.Ascii)))
	for _, msg := range msgs {
		switch msg := msg.(type) {
		case []any:
			for _, x := range msg {
				tm.Send(x)
			}
		default:
			tm.Send(msg)
		}
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(ui.Model)
}

// screen is what the final model draws, as text.
func screen(m ui.Model) string { return ansi.Strip(m.View().Content) }

func requireScreen(t *testing.T, m ui.Model) {
	t.Helper()
	golden.RequireEqual(t, screen(m)+"\n")
}

func job(name, state, ready string, restarts int32, age time.Duration, conds ...kube.Condition) *kube.Job {
	return &kube.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Kind: "TfJob", State: state, Phase: state, Replicas: ready, Restarts: restarts, Conditions: conds,
	}
}

// docJobs are the four jobs of docs/tfjob-api.md's kubectl example.
func docJobs() []any {
	mnist := job("mnist", "Running", "master 1/1 worker 2/2 ps 2/2", 0, 41*time.Second,
		kube.Condition{Type: "Created", Status: "True", Reason: "ReplicasCreated", Message: "created 5 pods and their addresses"},
		kube.Condition{Type: "Running", Status: "True", Reason: "ReplicasRunning", Message: "every replica is running or done"})
	mnist.Tensorboard = &kube.Tensorboard{ServiceName: "mnist-tensorboard", URL: "http://mnist-tensorboard.team-a.svc",
		ProxyPath: "/api/v1/namespaces/team-a/services/mnist-tensorboard:80/proxy/", Ready: true}
	bad := job("mnist-bad", "Failed", "master 0/1 worker 0/2 ps 0/2", 0, 95*time.Second)
	done := job("mnist-done", "Succeeded", "master 0/1 worker 0/2 ps 0/2", 0, 7*time.Minute)
	done.Phase = "Done"
	retry := job("mnist-retry", "Running", "master 1/1 worker 1/2 ps 2/2", 1, 3*time.Hour+5*time.Minute,
		kube.Condition{Type: "Running", Status: "False", Reason: "ReplicasNotRunning", Message: "waiting for mnist-retry-worker-1 (Pending)"},
		kube.Condition{Type: "Created", Status: "True", Reason: "ReplicasCreated", Message: "created 5 pods and their addresses"},
		kube.Condition{Type: "Restarting", Status: "True", Reason: "RetryableFailure",
			Message: "pod mnist-retry-worker-1 exited with code 137 (Error; retryable: 128-255); recreating it (restart 1 of backoffLimit 3)"})
	var msgs []any
	for _, j := range []*kube.Job{mnist, bad, done, retry} {
		msgs = append(msgs, kube.JobUpserted{Job: j})
	}
	for _, k := range kube.Kinds {
		msgs = append(msgs, kube.JobsSynced{Kind: k.Name})
	}
	return msgs
}

func replica(job, typ string, i int, phase string, age time.Duration) *kube.Replica {
	return &kube.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", job, typ, i), Namespace: "team-a",
			UID: "pod-uid", CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Type: typ, Index: i, Phase: phase, Ready: phase == "Running", Running: phase == "Running",
		Container: "tensorflow", ContainerID: "containerd://1", Node: "mlkube-control-plane", Containers: []string{"tensorflow"},
	}
}

// retryReplicas are mnist-retry's pods: worker 1 was killed (137) and is starting again.
func retryReplicas(watch int) []any {
	w1 := replica("mnist-retry", "worker", 1, "Pending", 4*time.Second)
	w1.Ready, w1.Running, w1.Waiting, w1.ContainerID = false, false, "ContainerCreating", ""
	w0 := replica("mnist-retry", "worker", 0, "Running", 3*time.Hour)
	w0.Exited, w0.ExitCode, w0.ExitReason, w0.Restarts = true, 137, "OOMKilled", 2
	msgs := []any{}
	for _, r := range []*kube.Replica{
		replica("mnist-retry", "ps", 1, "Running", 3*time.Hour), replica("mnist-retry", "ps", 0, "Running", 3*time.Hour),
		w1, w0, replica("mnist-retry", "master", 0, "Running", 3*time.Hour),
	} {
		msgs = append(msgs, kube.ReplicaUpserted{Watch: watch, Replica: r})
	}
	ev := func(name string, ago time.Duration, typ, reason, note string) any {
		return kube.EventUpserted{Watch: watch, Event: &kube.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			Type: typ, Reason: reason, Note: note, Count: 1, Last: t0.Add(-ago)}}
	}
	msgs = append(msgs,
		ev("e1", 3*time.Hour, "Normal", "Created", "created 5 pods and 1 service"),
		ev("e3", 4*time.Second, "Normal", "Created", "created 1 pod and 0 services"),
		ev("e2", 5*time.Second, "Warning", "Restarting", "pod mnist-retry-worker-1 exited with code 137 (Error; retryable: 128-255); recreating it (restart 1 of backoffLimit 3)"),
		kube.ReplicasSynced{Watch: watch})
	return msgs
}

func TestViewJobList(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...))
	requireScreen(t, m)
}

func TestViewJobListAllNamespaces(t *testing.T) {
	all := target
	all.Namespace = ""
	other := job("resnet", "Running", "chief 1/1 worker 8/8 ps 4/4", 0, 20*time.Minute)
	other.Namespace = "team-b"
	mx := job("mx-lm", "Running", "scheduler 1/1 server 2/2 worker 4/4", 3, 2*time.Minute)
	mx.Namespace, mx.Kind = "team-b", "MXJob"
	m := run(t, newModel(all), 100, 16, at(0, append(docJobs(), kube.JobUpserted{Job: other}, kube.JobUpserted{Job: mx})...))
	requireScreen(t, m)
}

// The list narrows as the filter is typed; s sorts by age, newest first.
func TestViewJobListFilterAndSort(t *testing.T) {
	m := run(t, newModel(target), 80, 12, at(0, docJobs()...), keys("/mnist-"), key("enter"), key("s"))
	requireScreen(t, m)
}

func TestViewReplicas(t *testing.T) {
	// mnist-retry is the last job by name: G goes there, enter opens it (watch 1).
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...))
	requireScreen(t, m)
}

// TensorBoard: the apiserver proxy URL, the in-cluster one, and the port-forward once b has
// started it (port-forward 2; the job's watch is 1).
func TestViewTensorboard(t *testing.T) {
	w := replica("mnist", "worker", 0, "Running", 41*time.Second)
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), key("b"),
		at(time.Second, kube.ReplicaUpserted{Watch: 1, Replica: w}, kube.ReplicasSynced{Watch: 1},
			kube.PortForwardReady{ID: 2, Pod: "mnist-tensorboard-7d4b9c-x2x4q", LocalURL: "http://localhost:40413"}))
	requireScreen(t, m)
}

func logLines(stream, from, n int) kube.LogLines {
	var lines []kube.LogLine
	for i := from; i < from+n; i++ {
		ts := t0.Add(time.Duration(i) * 1500 * time.Millisecond).Format(time.RFC3339Nano)
		text := fmt.Sprintf("step %d loss=%.3f", i*100, 2.5/float64(i+1))
		if i%7 == 3 {
			text = fmt.Sprintf("INFO:tensorflow:global_step/sec: %d.5", 40+i)
		}
		lines = append(lines, kube.LogLine{Time: ts, Text: text})
	}
	return kube.LogLines{Stream: stream, Lines: lines}
}

// Logs of worker 0 (stream 2), with timestamps, searched for "global_step", at the second
// match.
func TestViewLogs(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...),
		key("j"), key("l"), // worker 0, below the master
		at(0, logLines(2, 0, 40)), key("t"), keys("/global_step"), key("enter"), key("n"))
	requireScreen(t, m)
}

// ] switches replica without leaving the pane; the new stream starts empty.
func TestViewLogsSwitchReplica(t *testing.T) {
	m := run(t, newModel(target), 80, 12, at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...),
		key("l"), at(0, logLines(2, 0, 3)), key("]"), at(0, logLines(3, 50, 2)), at(0, logLines(2, 3, 5)))
	requireScreen(t, m)
}

func TestViewHelp(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), key("?"))
	requireScreen(t, m)
}

// State changes arrive as messages: a job fails, another is deleted, a new one appears, the
// cursor stays on the job it was on, and ages follow the batches' clock.
func TestViewStateChanges(t *testing.T) {
	failed := job("mnist", "Failed", "master 0/1 worker 0/2 ps 0/2", 0, 41*time.Second)
	fresh := job("bert", "Running", "chief 0/1 worker 0/4", 0, 0)
	m := run(t, newModel(target), 80, 12,
		at(0, docJobs()...), key("j"), key("j"), // on mnist-done
		at(90*time.Second,
			kube.JobUpserted{Job: failed},
			kube.JobDeleted{Key: kube.JobKey{Kind: "TfJob", Namespace: "team-a", Name: "mnist-bad"}},
			kube.JobUpserted{Job: fresh}))
	requireScreen(t, m)
	for _, l := range strings.Split(m.View().Content, "\n") {
		if strings.Contains(l, "mnist-done") && !strings.HasPrefix(l, "\x1b[7m") {
			t.Fatalf("the cursor left mnist-done: %q", l)
		}
	}
}

// Errors a person can act on take the status lines, and leave when the watch works again.
func TestViewErrors(t *testing.T) {
	forbidden := fmt.Errorf("%w: you need list, watch on tfjobs.mlkube.io in namespace team-a; "+
		"ask your cluster admin for a Role granting it (tfjobs.mlkube.io is forbidden: User \"viewer\" cannot list resource \"tfjobs\" in API group \"mlkube.io\" in the namespace \"team-a\")", kube.ErrForbidden)
	var msgs []any
	for _, k := range kube.Kinds {
		if k.Name != "TfJob" { // every kind's watch syncs but TfJob's, which is forbidden
			msgs = append(msgs, kube.JobsSynced{Kind: k.Name})
		}
	}
	m := run(t, newModel(target), 80, 14,
		at(0, append(msgs,
			kube.WatchFailed{Source: "tfjobs.mlkube.io in namespace team-a", Kind: "TfJob", Err: forbidden},
			kube.WatchFailed{Source: "mxjobs.mlkube.io in namespace team-a", Kind: "MXJob", Err: errors.New("mxjobs: cannot reach the cluster at https://127.0.0.1:6443")},
			kube.WatchOK{Source: "mxjobs.mlkube.io in namespace team-a"})...))
	requireScreen(t, m)
}

// Resized, the columns take the room.
func TestViewResize(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), tea.WindowSizeMsg{Width: 120, Height: 10})
	requireScreen(t, m)
	if got := strings.Count(screen(m), "\n") + 1; got != 10 {
		t.Fatalf("%d lines after resizing to 10", got)
	}
}

// Every view fills 80x24 exactly: no line wider, none missing.
func TestViewsFit80x24(t *testing.T) {
	for name, msgs := range map[string][]any{
		"jobs":    {at(0, docJobs()...)},
		"replica": {at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...)},
		"logs":    {at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...), key("l"), at(0, logLines(2, 0, 100))},
		"help":    {at(0, docJobs()...), key("?")},
		"tb":      {at(0, docJobs()...), key("b")},
		"failure": {at(0, progressJobs()...), keys("jjj"), key("enter")},
		"stalled": {at(0, progressJobs()...), key("j"), key("enter")},
	} {
		t.Run(name, func(t *testing.T) {
			lines := strings.Split(screen(run(t, newModel(target), 80, 24, msgs...)), "\n")
			if len(lines) != 24 {
				t.Errorf("%d lines, want 24", len(lines))
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w > 80 {
					t.Errorf("line %d is %d wide: %q", i+1, w, l)
				}
			}
		})
	}
}

// Without colour the screen has bold and reverse video, and no colour at all.
func TestNoColor(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...))
	v := m.View().Content
	if strings.Contains(v, "38;") || strings.Contains(v, "48;") {
		t.Fatalf("colour in --no-color mode: %q", v)
	}
	if !strings.Contains(v, "\x1b[7m") {
		t.Fatalf("no reverse video for the cursor: %q", v)
	}
	coloured := run(t, ui.New(ui.Config{Target: target, Kinds: kube.Kinds, Now: t0, FrozenClock: true}), 80, 24, at(0, docJobs()...))
	if !strings.Contains(coloured.View().Content, "38;") {
		t.Fatal("no colour without --no-color")
	}
}

// esc pressed twice fast arrives as alt+esc: it goes back twice.
func TestDoubleEscape(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...), key("l"),
		tea.KeyPressMsg{Code: tea.KeyEscape, Mod: tea.ModAlt})
	if !strings.Contains(screen(m), kindsTitle()+" (4)") {
		t.Fatalf("not back at the job list:\n%s", screen(m))
	}
}

func TestQuitKeys(t *testing.T) {
	for _, k := range []tea.KeyPressMsg{key("q"), {Code: 'c', Mod: tea.ModCtrl}} {
		tm := teatest.NewTestModel(t, newModel(target), teatest.WithInitialTermSize(80, 24))
		tm.Send(k)
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	}
}

// unreadableJobs are docJobs and two jobs the Go types cannot read whole: a TfJob whose status
// reads and an MXJob with none.
func unreadableJobs() []any {
	old := job("mnist-old", "Running", "master 1/1 worker 2/2 ps 2/2", 0, 30*24*time.Hour)
	old.Unreadable = "spec.runPolicy.ttlSecondsAfterFinished: number 2592000000 does not fit int32"
	mx := job("mx-odd", "", "", 0, time.Hour)
	mx.Kind, mx.Unreadable, mx.Phase = "MXJob", "status.restarts: string does not fit int32", ""
	return append(docJobs(), kube.JobUpserted{Job: old}, kube.JobUpserted{Job: mx})
}

// An unreadable job says so in the list, and, under the cursor, which field and what to do.
func TestViewUnreadableJobList(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, unreadableJobs()...), keys("jjj"))
	requireScreen(t, m)
}

// The job's view says which field cannot be read, and what to do, above its replicas.
func TestViewUnreadableJob(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, unreadableJobs()...), keys("jjj"), key("enter"),
		at(0, kube.ReplicaUpserted{Watch: 1, Replica: replica("mnist-old", "master", 0, "Running", time.Hour)}, kube.ReplicasSynced{Watch: 1}))
	requireScreen(t, m)
}

// A new job of the open job's name (another UID) is watched anew: the old job's pods go, and
// what the old watch still sends is dropped.
func TestViewANewJobOfTheOpenName(t *testing.T) {
	again := job("mnist-retry", "Running", "master 0/1 worker 0/2 ps 0/2", 0, time.Second)
	again.UID = "uid-mnist-retry-2"
	m := run(t, newModel(target), 80, 24, at(0, docJobs()...), key("G"), key("enter"), at(0, retryReplicas(1)...),
		at(time.Second, kube.JobUpserted{Job: again}),
		at(time.Second, kube.ReplicaUpserted{Watch: 1, Replica: replica("mnist-retry", "ps", 2, "Running", time.Hour)}))
	s := screen(m)
	if strings.Contains(s, "mnist-retry-ps-") || !strings.Contains(s, "loading replica pods") {
		t.Errorf("the old job's pods are still shown:\n%s", s)
	}
	m = run(t, m, 80, 24, at(time.Second, kube.ReplicaUpserted{Watch: 2, Replica: replica("mnist-retry", "master", 0, "Pending", time.Second)}))
	if s := screen(m); !strings.Contains(s, "mnist-retry-master-0") {
		t.Errorf("the new job's pod is not shown:\n%s", s)
	}
}
