//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The dashboard for real: `devctl dashboard` (tfjob-tui in devctl's process) runs in tmux
// against the suite's kind cluster, in a window of 200x50, and the test reads its screen with
// `tmux capture-pane` and types with `tmux send-keys`, as a person would. The jobs are real:
// submitted with devctl run, run by the operator, their pods by the kubelet. What the screen
// shows is checked against what the apiserver says, so that a dashboard showing stale or made-up
// state fails.
//
// tfjobTUI is the tfjob-tui binary (hack/e2e.sh builds it next to devctl); it is run once more
// through $KUBECONFIG, the way a user starts it.
var tfjobTUI = os.Getenv("MLKUBE_TUI")

// TestDashboard opens one dashboard on a namespace of its own and runs its checks as subtests in
// order. Each subtest starts and ends on the job list without a filter (dash.home) and submits
// the jobs it looks at, so that one more (TensorBoard's port-forward, say) can go anywhere
// between them: submit a job, d.open(t, job), press keys, d.home(t).
func TestDashboard(t *testing.T) {
	c, cfg := clusterClient(t)
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	ns := newNamespace(t, c, "dashboard")
	d := startDash(t, "dashboard", nil, devctl, "dashboard", "--name", name, "-n", ns)
	// --name reached the cluster through kind's kubeconfig, whose context kind names
	// kind-<name>; the namespace is empty yet, and the watches have listed it.
	d.waitFor(t, time.Minute, "the dashboard's empty job list", func(sc string) error {
		return want(sc, " tfjob-tui · context kind-"+name+" · namespace "+ns+" · https://127.0.0.1:", "no jobs in namespace "+ns)
	})

	t.Run("JobListFollowsAJobToSucceeded", func(t *testing.T) {
		dashboardJobList(t, d, c, ns)
	})

	// flaky is a job whose worker exits 137 once and is restarted in place: the next two
	// subtests look at it while its second run trains, the last one once it has ended.
	var flaky func() ran
	t.Run("ReplicaKilledWith137RestartsInPlace", func(t *testing.T) {
		flaky = dashboardRestart(t, d, c, ns)
	})
	t.Run("LogAndPreviousLog", func(t *testing.T) {
		if flaky == nil {
			t.Skip("no restarted job to look at: the subtest before failed")
		}
		dashboardLogs(t, d, cs, ns)
	})
	t.Run("RestartedJobSucceeds", func(t *testing.T) {
		if flaky == nil {
			t.Skip("no restarted job to look at: an earlier subtest failed")
		}
		r := d.listShowsEnded(t, c, ns, "flaky", 3*time.Minute)
		if r.restarts != "1" {
			t.Errorf("flaky's row counts %s restarts, want 1 (the in-place restart after exit 137)", r.restarts)
		}
		if run := flaky(); run.code != 0 {
			t.Errorf("devctl run of flaky exited %d, want 0", run.code)
		}
	})

	t.Run("TensorBoardPortForward", func(t *testing.T) {
		dashboardTensorBoard(t, d, c, ns)
	})

	t.Run("TfjobTUIBinary", func(t *testing.T) {
		if tfjobTUI == "" {
			t.Skip("MLKUBE_TUI is not set: hack/e2e.sh builds tfjob-tui and sets it")
		}
		// The suite's kubeconfig, whose current context devctl up made kind-<name>.
		tui := startDash(t, "tfjob-tui", []string{"KUBECONFIG=" + os.Getenv("KUBECONFIG")}, tfjobTUI, "-n", ns)
		tui.waitFor(t, time.Minute, "tfjob-tui on the suite's current context", func(sc string) error {
			return want(sc, " tfjob-tui · context kind-"+name+" · namespace "+ns+" · ")
		})
		// Every job of the namespace, as the apiserver has it now (both have ended).
		for _, job := range []string{"flaky", "steady"} {
			tui.listShowsEnded(t, c, ns, job, time.Minute)
		}
		tui.quit(t)
	})

	t.Run("NoSuchCluster", func(t *testing.T) {
		// Before any screen: what is missing, and what to do.
		r := devctlRun(t, "dashboard", "--name", "no-such-cluster")
		if r.code != 1 {
			t.Errorf("devctl dashboard --name no-such-cluster exited %d, want 1", r.code)
		}
		contains(t, "devctl dashboard --name no-such-cluster", r.out, "no cluster no-such-cluster: create it with `devctl up --name no-such-cluster`")
	})

	t.Run("Quit", func(t *testing.T) { d.quit(t) })
}

// dashboardJobList submits a small distributed job and watches its row on the job list, without
// a key pressed, from the first state shown to Succeeded.
func dashboardJobList(t *testing.T, d *dash, c client.Client, ns string) {
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: steady
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:`+trainer("--step-delay=500ms")+`
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=500ms")+`
  - tfReplicaType: PS
    template:
      spec:`+trainer("--step-delay=500ms")+`
`)
	d.home(t)
	wait := startDevctl(t, "run", file, "-n", ns)
	var states []string // each state the row showed, in order
	allReady := false   // the row showed every replica ready while the job ran
	d.waitFor(t, 3*time.Minute, "steady's row to reach Succeeded", func(sc string) error {
		r, ok := listRow(sc, "steady")
		if !ok {
			return errors.New("no row for steady")
		}
		if len(states) == 0 || states[len(states)-1] != r.state {
			states = append(states, r.state)
		}
		if r.state == "Running" && everyReplicaReady(r.ready, 3) {
			allReady = true
		}
		if r.state != "Succeeded" {
			return fmt.Errorf("steady's row is %+v", r)
		}
		return nil
	})
	t.Logf("steady's row showed the states %v", states)
	// The job was shown before it ended ("-": no status yet), ran, and succeeded, in that order.
	if !slices.Equal(states, []string{"-", "Running", "Succeeded"}) && !slices.Equal(states, []string{"Running", "Succeeded"}) {
		t.Errorf("steady's row showed the states %v, want [-] Running Succeeded", states)
	}
	if !allReady {
		t.Error("steady's row never showed master, worker and ps all ready while the job ran")
	}
	// What it ended on is what the operator wrote.
	d.listShowsEnded(t, c, ns, "steady", time.Minute)
	if job := getJob(t, c, ns, "steady"); job.Status.State != v1beta1.JobStateSucceeded {
		t.Errorf("steady's state in the apiserver is %q", job.Status.State)
	}
	if r := wait(); r.code != 0 {
		t.Errorf("devctl run of steady exited %d, want 0", r.code)
	}
}

// dashboardRestart submits flaky, whose worker exits 137 at its second step once (as a killed
// process does) and is restarted in place by the kubelet (restartPolicy OnFailure, so that the
// pod, its last exit and its previous log stay). The parameters live on a ps: a worker that
// holds them itself counts step 2 twice (as trainer and as parameter server), and the second
// count finds the once-file the first wrote and goes on, so it never exits. The job's view shows the exit code, the
// restart count and the replica running again, as the kubelet reported them. It returns the
// wait of flaky's devctl run.
func dashboardRestart(t *testing.T, d *dash, c client.Client, ns string) func() ran {
	// The second run trains for about 40 steps of a second: time to read its logs while the
	// pod still runs (once it has ended, the kubelet drops the first run's log).
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: flaky
spec:
  replicaSpecs:
  - tfReplicaType: WORKER
    restartPolicy: OnFailure
    template:
      spec:`+failOnce(ns+"-flaky-worker-0", "--step-delay=1s", "--exit-code=137", "--exit-at-step=2")+`
  - tfReplicaType: PS
    template:
      spec:`+trainer()+`
`)
	d.home(t)
	wait := startDevctl(t, "run", file, "-n", ns)
	defer func() {
		if t.Failed() {
			wait() // its output says what the job did
		}
	}()
	// The list counts the restart (status.restarts counts the kubelet's in-place restarts).
	d.waitFor(t, 2*time.Minute, "flaky's row counting one restart", func(sc string) error {
		if r, ok := listRow(sc, "flaky"); !ok || r.state != "Running" || r.restarts != "1" {
			return fmt.Errorf("flaky's row is %+v", r)
		}
		return nil
	})
	d.open(t, "flaky")
	row := regexp.MustCompile(`(?m)^ *worker +0 +flaky-worker-0 +Running +137 Error +1 +\S+ +\S+ *$`)
	sc := d.waitFor(t, 2*time.Minute, "worker 0 running again after exit 137, one restart", func(sc string) error {
		if !row.MatchString(sc) {
			return fmt.Errorf("worker 0's row is %q", lineWith(sc, "flaky-worker-0"))
		}
		return want(sc, "TfJob flaky · Running · ", " · restarts 1 · ")
	})
	t.Logf("flaky's view:\n%s", sc)
	// The screen said what the kubelet reported.
	var pod corev1.Pod
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "flaky-worker-0"}, &pod))
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != "tensorflow" {
			continue
		}
		if last := st.LastTerminationState.Terminated; last == nil || last.ExitCode != 137 || last.Reason != "Error" || st.RestartCount != 1 {
			t.Errorf("the kubelet reports restarts %d, last termination %+v; the dashboard showed 137 Error, 1", st.RestartCount, last)
		}
	}
	d.home(t)
	return wait
}

// dashboardLogs opens flaky's worker's log: the log of the running container, then (p) the one
// before the restart, then the running one again, each checked line by line against the log
// the apiserver gives for it.
func dashboardLogs(t *testing.T, d *dash, cs kubernetes.Interface, ns string) {
	// The trainer's lines name the global step (the ps's), which the first run moved on; the
	// worker's own step is 2 in both.
	goingOn := regexp.MustCompile(`(?m)│worker-0 step=\d+ --exit-once-file /once/` + ns + `-flaky-worker-0 exists: this replica failed on purpose before; going on$`)
	exiting := regexp.MustCompile(`(?m)│worker-0 step=\d+ exiting with code 137 at own step 2 \(--exit-code, --exit-at-step\)$`)
	d.open(t, "flaky")
	// Its row in the replica table: the pod's name shows earlier in the job's progress ("by
	// flaky-worker-0"), before the table has its pods and "l" has a replica to open.
	replicaRow := regexp.MustCompile(`(?m)^ *worker +0 +flaky-worker-0 `)
	d.waitFor(t, time.Minute, "flaky's replica", func(sc string) error {
		if !replicaRow.MatchString(sc) {
			return errors.New("no row for flaky-worker-0 in the replica table")
		}
		return nil
	})
	d.press(t, "l")
	title := "Logs " + ns + "/flaky-worker-0 · tensorflow"
	current := podLogLines(t, cs, ns, "flaky-worker-0", false)
	sc := d.waitFor(t, time.Minute, "the running container's log", func(sc string) error {
		if err := titleIs(sc, title); err != nil {
			return err
		}
		if !goingOn.MatchString(sc) {
			return errors.New("the pane lacks the second run's line that it goes on")
		}
		if err := want(sc, "│worker-0 step=0 cluster="); err != nil {
			return err
		}
		return logShown(sc, current)
	})
	if strings.Contains(sc, "previous container") || strings.Contains(sc, "exiting with code 137") {
		t.Errorf("the running container's log shows the run before the restart:\n%s", sc)
	}

	d.press(t, "p")
	previous := podLogLines(t, cs, ns, "flaky-worker-0", true)
	sc = d.waitFor(t, time.Minute, "the previous container's log", func(sc string) error {
		if err := titleIs(sc, title+" · previous container"); err != nil {
			return err
		}
		if !exiting.MatchString(sc) {
			return errors.New("the pane lacks the first run's line that it exits 137")
		}
		if err := want(sc, "│worker-0 step=0 cluster=", " · log ended"); err != nil {
			return err
		}
		return logShown(sc, previous)
	})
	if strings.Contains(sc, "going on") {
		t.Errorf("the previous container's log shows the run after the restart:\n%s", sc)
	}
	t.Logf("the previous container's log:\n%s", sc)

	d.press(t, "p")
	d.waitFor(t, time.Minute, "the running container's log again", func(sc string) error {
		if err := titleIs(sc, title); err != nil {
			return err
		}
		if !goingOn.MatchString(sc) {
			return errors.New("the pane lacks the second run's line that it goes on")
		}
		return nil
	})
	d.home(t)
}

// podLogLines is the log of the pod's tensorflow container (previous: of the one before the
// last restart), as the apiserver gives it.
func podLogLines(t *testing.T, cs kubernetes.Interface, ns, pod string, previous bool) []string {
	t.Helper()
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "tensorflow", Previous: previous}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("the log of %s (previous %v): %v", pod, previous, err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("the log of %s (previous %v) is too short to tell anything: %q", pod, previous, raw)
	}
	return lines
}

// logShown says which line of the log the pane lacks. Lines are matched on their first 100
// characters, after the pane's border: a line wider than the pane is cut at its edge.
func logShown(sc string, lines []string) error {
	for _, l := range lines {
		if r := []rune(strings.TrimRight(l, " ")); len(r) > 100 {
			l = string(r[:100])
		}
		if !strings.Contains(sc, "│"+l) {
			return fmt.Errorf("the log pane lacks the line %q", l)
		}
	}
	return nil
}

// want says which of the texts the screen lacks.
func want(sc string, texts ...string) error {
	for _, s := range texts {
		if !strings.Contains(sc, s) {
			return fmt.Errorf("the screen lacks %q", s)
		}
	}
	return nil
}

// titleIs says whether the view's title line (the second) is title.
func titleIs(sc, title string) error {
	lines := strings.Split(sc, "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[1]) != title {
		return fmt.Errorf("the title is not %q", title)
	}
	return nil
}

func lineWith(sc, text string) string {
	for _, l := range strings.Split(sc, "\n") {
		if strings.Contains(l, text) {
			return l
		}
	}
	return ""
}

// row is a job's row on the job list.
type row struct{ state, ready, restarts string }

// listRowRE reads a row: NAME KIND STATE READY PROGRESS RESTARTS AGE. READY has spaces
// ("master 1/1 worker 2/2"), its counts slashes; PROGRESS ("40%", "step 12", either maybe
// "stalled") is empty for a job whose trainers do not report; RESTARTS is the last number
// before the age.
var listRowRE = regexp.MustCompile(`^ *(\S+) +(` + kindNames + `) +(\S+(?:, CreateRefused)?) +([a-z]+ \d+/\d+(?: [a-z]+ \d+/\d+)*)(?: +(?:\d+%|step \d+)(?: stalled)?)? +(\d+) +(\S+) *$`)

// kindNames matches the name of any kind of the table: "TfJob|MXJob|...".
var kindNames = func() string {
	var names []string
	for _, k := range v1beta1.Kinds {
		names = append(names, regexp.QuoteMeta(k.Name))
	}
	return strings.Join(names, "|")
}()

func listRow(sc, job string) (row, bool) {
	for _, l := range strings.Split(sc, "\n") {
		if m := listRowRE.FindStringSubmatch(l); m != nil && m[1] == job {
			return row{state: m[3], ready: m[4], restarts: m[5]}, true
		}
	}
	return row{}, false
}

// everyReplicaReady says whether READY ("master 1/1 worker 1/1 ps 1/1") counts n replicas, all
// ready.
func everyReplicaReady(ready string, n int) bool {
	f := strings.Fields(ready)
	if len(f)%2 != 0 {
		return false
	}
	total := 0
	for i := 1; i < len(f); i += 2 {
		var r, of int
		if _, err := fmt.Sscanf(f[i], "%d/%d", &r, &of); err != nil || r != of {
			return false
		}
		total += of
	}
	return total == n
}

// dash is a dashboard running in a tmux session of its own (its own server, on a socket in the
// test's temporary folder), 200 columns by 50 lines.
type dash struct {
	socket, session string
}

// startDash runs argv in a new tmux session with env added; t.Cleanup kills the session's
// server. The shell stays after the dashboard, so that its exit status can be read on screen.
func startDash(t *testing.T, session string, env []string, argv ...string) *dash {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: the dashboard tests drive the dashboard in tmux (hack/e2e.sh installs it as root; else apt-get install tmux)")
	}
	d := &dash{socket: filepath.Join(t.TempDir(), "tmux.sock"), session: session}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	args := []string{"-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "200", "-y", "50"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, "sh", "-c", strings.Join(quoted, " ")+`; echo "dashboard exited $?"; sleep 3600`)
	d.tmux(t, args...)
	t.Logf("tmux session %s: %s", session, strings.Join(argv, " "))
	t.Cleanup(func() {
		if t.Failed() {
			if sc, err := exec.Command("tmux", "-S", d.socket, "capture-pane", "-p", "-t", d.session).Output(); err == nil {
				t.Logf("the screen of %s at the end:\n%s", session, sc)
			}
		}
		_ = exec.Command("tmux", "-S", d.socket, "kill-server").Run()
	})
	return d
}

func (d *dash) tmux(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", d.socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the window shows now, as text.
func (d *dash) screen(t *testing.T) string {
	t.Helper()
	return d.tmux(t, "capture-pane", "-p", "-t", d.session)
}

// press sends keys by tmux's names (Enter, Escape) or as the characters they are.
func (d *dash) press(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		d.tmux(t, "send-keys", "-t", d.session, k)
	}
}

// waitFor reads the screen until cond accepts it, and returns that screen; at the deadline it
// fails with cond's last complaint and the screen.
func (d *dash) waitFor(t *testing.T, timeout time.Duration, what string, cond func(sc string) error) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sc := d.screen(t)
		err := cond(sc)
		if err == nil {
			return sc
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v; the screen is:\n%s", timeout, what, err, sc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// view names what the screen shows, from its title line and key hints: "list", "list
// filtered", "input" (a filter or search being typed), "job", "logs" or "help".
func view(sc string) string {
	lines := strings.Split(sc, "\n")
	if len(lines) < 2 {
		return ""
	}
	title := strings.TrimSpace(lines[1])
	switch {
	case strings.Contains(sc, "esc clear"):
		return "input"
	case title == "Help":
		return "help"
	case strings.HasPrefix(title, "Logs "):
		return "logs"
	case regexp.MustCompile(`\(\d+(/\d+)?\)  sort: (name|age)`).MatchString(title):
		if strings.Contains(title, "  filter: /") {
			return "list filtered"
		}
		return "list"
	case regexp.MustCompile(`^(` + kindNames + `) \S+ · `).MatchString(title):
		return "job"
	}
	return ""
}

// home goes back to the job list without a filter: esc, each time once the last one has been
// taken (so that two are never read together as alt+esc).
func (d *dash) home(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		sc := d.screen(t)
		v := view(sc)
		if v == "list" {
			return
		}
		if i == 5 {
			t.Fatalf("esc does not lead back to the job list; the screen is:\n%s", sc)
		}
		d.press(t, "Escape")
		d.waitFor(t, 10*time.Second, "esc to leave the "+v+" view", func(sc string) error {
			if view(sc) == v {
				return errors.New("still there")
			}
			return nil
		})
	}
}

// open goes from the job list into the job: / filters the list down to it, enter keeps the
// filter, enter opens the job.
func (d *dash) open(t *testing.T, job string) {
	t.Helper()
	d.home(t)
	d.press(t, "/")
	d.waitFor(t, 10*time.Second, "the filter's input", func(sc string) error {
		if view(sc) != "input" {
			return errors.New("no input")
		}
		return nil
	})
	d.tmux(t, "send-keys", "-t", d.session, "-l", job)
	d.waitFor(t, 10*time.Second, "the list filtered down to "+job, func(sc string) error {
		if _, ok := listRow(sc, job); !ok {
			return errors.New("no row for " + job)
		}
		return want(sc, "(1/", "  filter: /"+job)
	})
	d.press(t, "Enter")
	d.waitFor(t, 10*time.Second, "the filter kept", func(sc string) error {
		if view(sc) != "list filtered" {
			return errors.New("not on the filtered list")
		}
		return nil
	})
	d.press(t, "Enter")
	d.waitFor(t, 30*time.Second, "the view of "+job, func(sc string) error {
		if view(sc) != "job" {
			return errors.New("not on a job's view")
		}
		return want(sc, " "+job+" · ")
	})
}

// listShowsEnded waits until the job has ended and its row on the list shows it as the
// apiserver has it: state, ready/total per replica type, restarts. It returns the row.
func (d *dash) listShowsEnded(t *testing.T, c client.Client, ns, job string, timeout time.Duration) row {
	t.Helper()
	d.home(t)
	var got row
	d.waitFor(t, timeout, job+"'s row to show its status", func(sc string) error {
		var j v1beta1.TfJob
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: job}, &j); err != nil {
			return err
		}
		r, ok := listRow(sc, job)
		if !ok {
			return fmt.Errorf("no row for %s", job)
		}
		st := j.Status
		if st.State != v1beta1.JobStateSucceeded && st.State != v1beta1.JobStateFailed {
			return fmt.Errorf("%s has not ended: %s", job, st.State)
		}
		if w := (row{state: string(st.State), ready: st.Replicas, restarts: fmt.Sprint(st.Restarts)}); r != w {
			return fmt.Errorf("%s's row is %+v, the apiserver says %+v", job, r, w)
		}
		got = r
		return nil
	})
	return got
}

// quit presses q: the dashboard ends, exit status 0.
func (d *dash) quit(t *testing.T) {
	t.Helper()
	d.home(t)
	d.press(t, "q")
	d.waitFor(t, 30*time.Second, "the dashboard to quit", func(sc string) error { return want(sc, "dashboard exited 0") })
}

// dashboardTensorBoard opens a job whose TensorBoard (the stand-in) is ready, starts the
// port-forward with b, and reads the event files the master wrote through the localhost URL the
// dashboard shows; b again stops it.
func dashboardTensorBoard(t *testing.T, d *dash, c client.Client, ns string) {
	r := devctlRun(t, "run", manifest(t, tensorboardJob("tb", "/tmp/mlkube-logs-"+ns)), "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	eventually(t, 2*time.Minute, "status.tensorboard.ready", func() error {
		if tb := getJob(t, c, ns, "tb").Status.Tensorboard; tb == nil || !tb.Ready {
			return fmt.Errorf("status.tensorboard %+v", tb)
		}
		return nil
	})
	d.open(t, "tb")
	d.waitFor(t, 30*time.Second, "TensorBoard ready on the job's view", func(sc string) error {
		return want(sc, " TensorBoard  ", "/api/v1/namespaces/"+ns+"/services/tb-tensorboard:80/proxy/ ready", "b: port-forward to localhost")
	})
	d.press(t, "b")
	forwarded := regexp.MustCompile(`port-forward (http://(?:127\.0\.0\.1|localhost):\d+)/? → pod (tb-tensorboard-\S+)`)
	var url string
	d.waitFor(t, 30*time.Second, "the port-forward's URL", func(sc string) error {
		m := forwarded.FindStringSubmatch(sc)
		if m == nil {
			return errors.New("no port-forward URL shown")
		}
		url = m[1]
		return nil
	})
	resp, err := http.Get(url + "/data/files")
	if err != nil {
		t.Fatalf("GET %s/data/files through the dashboard's port-forward: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"path":"events.out.tfevents.`) || !strings.Contains(string(body), ".tb-master-0") {
		t.Errorf("GET %s/data/files: %s\n%s", url, resp.Status, body)
	}
	d.press(t, "b")
	d.waitFor(t, 30*time.Second, "the port-forward stopped", func(sc string) error {
		return want(sc, "b: port-forward to localhost")
	})
	if _, err := http.Get(url + "/data/files"); err == nil {
		t.Errorf("%s still answers after b stopped the port-forward", url)
	}
	d.home(t)
}
