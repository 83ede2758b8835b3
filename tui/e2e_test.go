package tui_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/internal/tuifixture"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
)

// The end-to-end tests run the tfjob-tui binary in tmux against a real kube-apiserver and etcd
// (envtest). The test plays the operator and the kubelet: it writes job and pod statuses and
// records events, and reads the screen with tmux capture-pane.
//
// Without the control-plane binaries they skip, except under MLKUBE_REQUIRE_ENVTEST=1 (make
// test); without tmux they skip, except under MLKUBE_REQUIRE_TMUX=1.

var (
	clusterOnce sync.Once
	cluster     *tuifixture.Cluster
	clusterErr  error
	clusterDir  string

	binOnce sync.Once
	bin     string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
	}
	if clusterDir != "" {
		_ = os.RemoveAll(clusterDir)
	}
	os.Exit(code)
}

// envtestCluster starts the shared control plane on first use.
func envtestCluster(t *testing.T) *tuifixture.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		clusterDir, clusterErr = os.MkdirTemp("", "tfjob-tui-e2e")
		if clusterErr == nil {
			cluster, clusterErr = tuifixture.Start(clusterDir)
		}
	})
	if errors.Is(clusterErr, controlplane.ErrNoAssets) {
		t.Skip(clusterErr)
	}
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

// tfjobTUI builds the binary once.
func tfjobTUI(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tfjob-tui-bin")
		if err != nil {
			binErr = err
			return
		}
		bin = filepath.Join(dir, "tfjob-tui")
		out, err := exec.Command("go", "build", "-o", bin, "./cmd/tfjob-tui").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("building tfjob-tui: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return bin
}

func requireTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("MLKUBE_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is not installed (MLKUBE_REQUIRE_TMUX is set): apt-get install tmux")
		}
		t.Skip("tmux is not installed: the end-to-end tests run tfjob-tui in tmux (apt-get install tmux)")
	}
}

// term is a tmux session running one command in a window of a fixed size.
type term struct {
	t      *testing.T
	socket string
}

func newTerm(t *testing.T, w, h int, argv ...string) *term {
	t.Helper()
	requireTmux(t)
	s := &term{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	// The shell stays after the program, so its exit status can be read from the screen.
	cmd := strings.Join(quote(argv), " ") + `; echo "tfjob-tui exited $?"; sleep 600`
	s.tmux("-f", "/dev/null", "new-session", "-d", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "-s", "tui", "sh", "-c", cmd)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	return s
}

func quote(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}

func (s *term) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the window shows now.
func (s *term) screen() string { return s.tmux("capture-pane", "-p", "-t", "tui") }

// press sends keys one at a time (tmux names: Enter, Escape, Down), so none is read as part of
// an escape sequence.
func (s *term) press(keys ...string) {
	for _, k := range keys {
		s.tmux("send-keys", "-t", "tui", k)
		if k == "Escape" {
			time.Sleep(150 * time.Millisecond) // so it is not read with the next key as alt+key
		} else {
			time.Sleep(60 * time.Millisecond)
		}
	}
}

// waitFor waits until the screen satisfies cond, and returns it.
func (s *term) waitFor(what string, cond func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		sc := s.screen()
		if cond(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("waiting for %s; the screen is:\n%s", what, sc)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

func (s *term) waitText(texts ...string) string {
	s.t.Helper()
	return s.waitFor(strings.Join(texts, " and "), func(sc string) bool {
		for _, t := range texts {
			if !strings.Contains(sc, t) {
				return false
			}
		}
		return true
	})
}

// line is the screen line that holds text.
// line is the table row that names text, not a condition or event message that mentions it.
func line(sc, text string) string {
	for _, l := range strings.Split(sc, "\n") {
		if strings.Contains(l, text) && !strings.Contains(l, "exited with code") {
			return l
		}
	}
	return ""
}

// keepScreen saves a screen for docs/tui.md when MLKUBE_TUI_SCREENS names a folder.
func keepScreen(t *testing.T, name, sc string) {
	if dir := os.Getenv("MLKUBE_TUI_SCREENS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(sc), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func TestEndToEnd(t *testing.T) {
	c := envtestCluster(t)
	requireTmux(t)
	bin := tfjobTUI(t)
	ctx := context.Background()
	const ns = "e2e"
	if err := tuifixture.Populate(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	kubelet, err := c.StartKubelet(ctx, "node-1") // the pods' node: logs and port-forwards reach it
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	kubelet.SetLog(ns, "mnist-retry-master-0", "tensorflow", false,
		"INFO:tensorflow:TF_CONFIG environment variable: {\"cluster\": ...}",
		"INFO:tensorflow:global_step/sec: 41.5",
		"step 0 loss=2.3026")
	kubelet.SetLog(ns, "mnist-retry-master-0", "tensorflow", true, "Killed: out of memory (the previous container)")
	s := newTerm(t, 100, 30, bin, "--kubeconfig", c.Kubeconfig, "-n", ns)

	// The job list: the four jobs of the docs, their states and ready counts.
	sc := s.waitFor("the four jobs, loaded", func(sc string) bool {
		return strings.Contains(sc, kindsTitle()+" (4)") && strings.Contains(sc, "mnist-retry") && !strings.Contains(sc, "loading")
	})
	keepScreen(t, "jobs", sc)
	for job, want := range map[string][2]string{
		"mnist ":       {"Running", "master 1/1 worker 2/2 ps 2/2"},
		"mnist-bad":    {"Failed", "master 0/1 worker 0/2 ps 0/2"},
		"mnist-done":   {"Succeeded", "master 0/1 worker 0/2 ps 0/2"},
		"mnist-retry ": {"Running", "master 1/1 worker 1/2 ps 2/2"},
	} {
		// Their trainers never reported: nothing between the ready counts and the restarts.
		if l := line(sc, job); !regexp.MustCompile(" " + want[0] + " +" + regexp.QuoteMeta(want[1]) + ` +\d+ `).MatchString(l) {
			t.Errorf("%s row is %q, want it to hold %q, then %q, then the restarts", job, l, want[0], want[1])
		}
	}

	// A status write shows up: mnist loses a worker, counts a restart, and its trainers report.
	std := tuifixture.Standard
	st := tuifixture.Running(std, 3)
	st.Replicas = "master 1/1 worker 1/2 ps 2/2"
	total, pct := int64(1000), int32(42)
	st.Progress = &v1beta1.JobProgress{Step: 420, TotalSteps: &total, Percent: &pct, Replica: "mnist-master-0", ReportTime: metav1.Now(), Summary: "42%"}
	if err := c.SetJobStatus(ctx, "TfJob", ns, "mnist", st); err != nil {
		t.Fatal(err)
	}
	s.waitFor("mnist's new status", func(sc string) bool {
		l := line(sc, "mnist ")
		return strings.Contains(l, "worker 1/2") && strings.Contains(l, " 3 ") && strings.Contains(l, " 42% ")
	})

	// New jobs appear, deleted ones go.
	uid, err := c.CreateJob(ctx, "TfJob", ns, "bert", []tuifixture.Group{{Type: "CHIEF", Replicas: 1}, {Type: "WORKER", Replicas: 4}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateJob(ctx, "MXJob", ns, "mx-lm", []tuifixture.Group{{Type: "SCHEDULER", Replicas: 1}, {Type: "SERVER", Replicas: 1}, {Type: "WORKER", Replicas: 2}}, false); err != nil {
		t.Fatal(err)
	}
	s.waitText("bert", "mx-lm", "MXJob", "(6)")
	if err := c.DeleteJob(ctx, "TfJob", ns, "mnist-bad"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("mnist-bad to go", func(sc string) bool { return !strings.Contains(sc, "mnist-bad") && strings.Contains(sc, "(5)") })

	// The filter.
	s.press("/", "r", "e", "t", "r", "y", "Enter")
	sc = s.waitText("filter: /retry", "(1/5)")
	if strings.Contains(sc, "mnist-done") {
		t.Fatalf("the filter kept mnist-done:\n%s", sc)
	}
	s.press("Escape")
	s.waitText("(5)", "mnist-done")

	// Into mnist-retry: replicas, conditions, events.
	s.press("G", "k", "Enter") // mx-lm is last by name, then mnist-retry
	sc = s.waitText("TfJob mnist-retry", "mnist-retry-worker-1", "RetryableFailure", "exited with code 137")
	keepScreen(t, "replicas", sc)
	s.waitFor("worker 1 row with its last exit (137 Error) and its node", func(sc string) bool {
		l := line(sc, "mnist-retry-worker-1")
		return strings.Contains(l, "137 Error") && strings.Contains(l, "node-1")
	})
	_ = uid

	// The kubelet reports worker 0 OOM-killed: the row changes.
	if err := c.SetPodStatus(ctx, ns, "mnist-retry-worker-0", tuifixture.PodExited("tensorflow", 137, "OOMKilled")); err != nil {
		t.Fatal(err)
	}
	s.waitFor("worker 0 OOMKilled", func(sc string) bool {
		l := line(sc, "mnist-retry-worker-0")
		return strings.Contains(l, "Failed") && strings.Contains(l, "137 OOMKilled")
	})
	// The operator records an event and fails the job.
	retryUID := jobUID(t, c, ns, "mnist-retry")
	if err := c.RecordEvent(ctx, "TfJob", ns, "mnist-retry", retryUID, "Warning", "Failed", "pod mnist-retry-worker-0 exited with code 137 (OOMKilled; out of memory, permanent): the job failed"); err != nil {
		t.Fatal(err)
	}
	failed := tuifixture.Running(std, 1)
	failed.State, failed.Phase = v1beta1.JobStateFailed, v1beta1.JobPhaseFailed
	if err := c.SetJobStatus(ctx, "TfJob", ns, "mnist-retry", failed); err != nil {
		t.Fatal(err)
	}
	s.waitText("worker-0 exited with code 137 (OOMKilled", "TfJob mnist-retry · Failed")

	// Logs of master 0, followed: the kubelet adds a step every 300 ms.
	s.press("k", "k", "l")
	sc = s.waitText("Logs e2e/mnist-retry-master-0", "global_step/sec: 41.5", "step 200 loss")
	keepScreen(t, "logs", sc)
	s.press("t") // timestamps
	s.waitText("2026-11-21T21:23:45.000Z INFO:tensorflow:TF_CONFIG", "timestamps on")
	s.press("/", "g", "l", "o", "b", "a", "l", "Enter") // search
	s.waitText("/global: 1 of 1", "follow off")
	s.press("p") // the previous container's log
	s.waitText("previous container", "Killed: out of memory (the previous container)")
	s.press("]") // the next replica, without leaving
	sc = s.waitText("Logs e2e/mnist-retry-worker-0", "starting tensorflow in e2e/mnist-retry-worker-0")
	s.press("Escape")
	s.waitText("LAST EXIT", "Conditions")

	// Help, then back.
	s.press("?")
	s.waitText("Keys of the job view")
	s.press("Escape", "Escape")
	s.waitText(kindsTitle() + " (5)")

	// TensorBoard: b on mnist shows the links and port-forwards to the TensorBoard pod through
	// the apiserver; the page answers on localhost until the view is left.
	s.press("g", "j", "b") // bert, then mnist
	sc = s.waitText("port-forward http://localhost:")
	keepScreen(t, "tensorboard", sc)
	for _, want := range []string{"/api/v1/namespaces/e2e/services/mnist-tensorboard:80/proxy/", "in cluster http://mnist-tensorboard.e2e.svc", "pod mnist-tensorboard-0"} {
		if !strings.Contains(strings.ReplaceAll(sc, "\n              ", ""), want) {
			t.Errorf("the TensorBoard lines lack %q:\n%s", want, sc)
		}
	}
	local := regexp.MustCompile(`http://localhost:\d+`).FindString(sc)
	resp, err := http.Get(local)
	if err != nil {
		t.Fatalf("GET %s: %v", local, err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "TensorBoard") {
		t.Fatalf("GET %s = %q, want TensorBoard's page", local, page)
	}
	s.press("Escape")
	s.waitText(kindsTitle() + " (5)")
	if err := tuifixture.Eventually(5*time.Second, func() error {
		if resp, err := http.Get(local); err == nil {
			resp.Body.Close()
			return fmt.Errorf("%s still answers after leaving the job", local)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// q quits, with status 0.
	s.press("q")
	s.waitText("tfjob-tui exited 0")
}

func jobUID(t *testing.T, c *tuifixture.Cluster, ns, name string) types.UID {
	t.Helper()
	u, err := c.Dyn.Resource(kube.Kinds[0].GVR()).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetUID()
}

// A user who may not list TfJobs is told which permission is missing.
func TestEndToEndForbidden(t *testing.T) {
	c := envtestCluster(t)
	requireTmux(t)
	bin := tfjobTUI(t)
	ctx := context.Background()
	const ns = "e2e-rbac"
	if err := c.Namespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// viewer may list MXJobs but not TfJobs.
	if err := c.Grant(ctx, ns, "viewer", v1beta1.GroupVersion.Group, []string{"mxjobs"}, []string{"get", "list", "watch"}); err != nil {
		t.Fatal(err)
	}
	kc, err := c.WriteKubeconfig("viewer")
	if err != nil {
		t.Fatal(err)
	}
	s := newTerm(t, 100, 24, bin, "--kubeconfig", kc, "-n", ns)
	sc := s.waitText("forbidden: you need list, watch on tfjobs.mlkube.io in namespace e2e-rbac")
	keepScreen(t, "forbidden", sc)
	s.press("q")
	s.waitText("tfjob-tui exited 0")
}

// Errors before the screen opens say what to do, and exit 1.
func TestEndToEndStartErrors(t *testing.T) {
	c := envtestCluster(t)
	bin := tfjobTUI(t)
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: gone, context: {cluster: c, user: u}}]
current-context: gone
users: [{name: u, user: {token: t}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		env  []string
		args []string
		want string
	}{
		"no kubeconfig": {env: []string{"KUBECONFIG=", "HOME=" + dir}, want: "no kubeconfig"},
		"unreachable":   {args: []string{"--kubeconfig", unreachable}, want: "cannot reach the cluster at https://127.0.0.1:1"},
		"bad context":   {args: []string{"--kubeconfig", c.Kubeconfig, "--context", "nope"}, want: `context "nope" does not exist`},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit %v, want status 1; stderr: %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q, want %q", stderr.String(), tc.want)
			}
		})
	}
}

// A cluster without the CRDs is told to install them.
func TestServedWithoutCRDs(t *testing.T) {
	c := envtestCluster(t)
	_, err := kube.Served(context.Background(), c.Config, []*v1beta1.Kind{{Name: "NopeJob", Plural: "nopejobs"}})
	if !errors.Is(err, kube.ErrNotInstalled) || !strings.Contains(err.Error(), "devctl up") {
		t.Fatalf("got %v", err)
	}
	kinds, err := kube.Served(context.Background(), c.Config, kube.Kinds)
	if err != nil || len(kinds) == 0 || kinds[0] != v1beta1.Kinds[0] {
		t.Fatalf("served %v, %v", kinds, err)
	}
}
