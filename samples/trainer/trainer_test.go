package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log that replicas running as goroutines can share with the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testCluster runs replicas as goroutines on loopback, each with its own TF_CONFIG. The
// replicas that serve parameters get a listener opened up front, so no port is ever raced for.
type testCluster struct {
	t         *testing.T
	cluster   map[string][]string
	listeners map[string]net.Listener
	logs      map[string]*syncBuffer
	mu        sync.Mutex
}

func newTestCluster(t *testing.T, counts map[string]int) *testCluster {
	c := &testCluster{t: t, cluster: map[string][]string{}, listeners: map[string]net.Listener{}, logs: map[string]*syncBuffer{}}
	for typ, n := range counts {
		for i := range n {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c.cluster[typ] = append(c.cluster[typ], ln.Addr().String())
			c.listeners[fmt.Sprintf("%s-%d", typ, i)] = ln
		}
	}
	t.Cleanup(func() {
		for _, ln := range c.listeners {
			ln.Close()
		}
		if t.Failed() {
			for name, log := range c.logs {
				t.Logf("--- %s\n%s", name, log.String())
			}
		}
	})
	return c
}

func (c *testCluster) config(typ string, index int) TFConfig {
	return TFConfig{Cluster: c.cluster, Task: Task{Type: typ, Index: index}, Environment: "cloud"}
}

// run runs one replica and returns its exit code.
func (c *testCluster) run(ctx context.Context, typ string, index int, o Options) int {
	cfg := c.config(typ, index)
	name := cfg.Name()
	log := &syncBuffer{}
	c.mu.Lock()
	c.logs[name] = log
	c.mu.Unlock()
	o.Out, o.Hostname = log, "test"
	if typ == typePS || cfg.HostsParams() {
		o.Listener = c.listeners[name]
	}
	return Run(ctx, cfg, o)
}

func (c *testCluster) log(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.logs[name]; b != nil {
		return b.String()
	}
	return ""
}

// start runs a replica in the background; the channel yields its exit code.
func (c *testCluster) start(ctx context.Context, typ string, index int, o Options) <-chan int {
	done := make(chan int, 1)
	go func() { done <- c.run(ctx, typ, index, o) }()
	return done
}

func wait(t *testing.T, name string, ch <-chan int, want int) {
	t.Helper()
	select {
	case code := <-ch:
		if code != want {
			t.Errorf("%s exited %d, want %d", name, code, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not exit", name)
	}
}

// stillRunning fails the test when the replica behind ch has exited.
func stillRunning(t *testing.T, name string, ch <-chan int) {
	t.Helper()
	select {
	case code := <-ch:
		t.Fatalf("%s exited %d on its own", name, code)
	default:
	}
}

func testOptions(t *testing.T) Options {
	o := defaultOptions()
	o.LogDir = t.TempDir()
	o.PeerTimeout = 10 * time.Second
	o.EvalInterval = 5 * time.Millisecond
	// A little pause per step makes sure every trainer gets to push before the decider is done.
	o.StepDelay = 2 * time.Millisecond
	return o
}

var evalLossRE = regexp.MustCompile(`eval_loss=([0-9.]+)`)

// lastEvalLoss is the last eval_loss in log, rounded to 4 places as logged: a loss just under
// the threshold may read as the threshold itself.
func lastEvalLoss(t *testing.T, log string) float64 {
	t.Helper()
	m := evalLossRE.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		t.Fatalf("no eval_loss in:\n%s", log)
	}
	v, _ := strconv.ParseFloat(m[len(m)-1][1], 64)
	return v
}

// wantFalling checks the decider's event file in o.LogDir: several losses, from about 10 to under
// o.LossThreshold, strictly down until near the noise floor, where SGD may wobble.
func wantFalling(t *testing.T, o Options) {
	t.Helper()
	losses := eventLosses(t, o.LogDir)
	if len(losses) < 3 || losses[0] < 5 || losses[len(losses)-1] >= float32(o.LossThreshold) {
		t.Fatalf("losses %v: want several, from about 10 to under %g", losses, o.LossThreshold)
	}
	for i := 1; i < len(losses); i++ {
		if losses[i-1] > 0.05 && losses[i] >= losses[i-1] {
			t.Errorf("loss went up: %v", losses)
		}
	}
}

// eventLosses reads the one event file in dir and returns its losses in order.
func eventLosses(t *testing.T, dir string) []float32 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*.test"))
	if len(files) != 1 {
		t.Fatalf("event files in %s: %v, want one", dir, files)
	}
	events, err := ReadEventFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[0].FileVersion != fileVersion {
		t.Fatalf("events %+v do not start with the file version", events)
	}
	var losses []float32
	lastStep := int64(-1)
	for _, e := range events[1:] {
		if len(e.Values) != 1 || e.Values[0].Tag != "loss" || e.Step < lastStep {
			t.Fatalf("event %+v: want one loss, steps in order", e)
		}
		lastStep = e.Step
		losses = append(losses, e.Values[0].SimpleValue)
	}
	return losses
}

func TestDistributedMasterWorkersPS(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeMaster: 1, typeWorker: 2, typePS: 2})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	psCtx, stopPS := context.WithCancel(ctx)
	defer stopPS()

	// Trainers first: they must wait for the parameter servers, as pods starting in any order do.
	master := c.start(ctx, typeMaster, 0, o)
	w0 := c.start(ctx, typeWorker, 0, o)
	w1 := c.start(ctx, typeWorker, 1, o)
	eval := c.start(ctx, typeEvaluator, 0, o)
	time.Sleep(150 * time.Millisecond)
	ps0 := c.start(psCtx, typePS, 0, o)
	ps1 := c.start(psCtx, typePS, 1, o)

	wait(t, "master-0", master, 0)
	wait(t, "worker-0", w0, 0)
	wait(t, "worker-1", w1, 0)
	wait(t, "evaluator-0", eval, 0)
	// Parameter servers never end on their own; SIGTERM (the context) ends them with 0.
	stillRunning(t, "ps-0", ps0)
	stopPS()
	wait(t, "ps-0", ps0, 0)
	wait(t, "ps-1", ps1, 0)

	mlog := c.log("master-0")
	if !strings.Contains(mlog, "converged: eval loss") || lastEvalLoss(t, mlog) > o.LossThreshold {
		t.Errorf("master did not converge:\n%s", mlog)
	}
	if !strings.HasPrefix(mlog, `master-0 step=0 cluster={"master":[`) || !strings.Contains(mlog, "task=master:0 role=decider") {
		t.Errorf("the first line does not show the cluster and task:\n%s", mlog)
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		if log := c.log(w); !strings.Contains(log, "local_step=1 ") || !strings.Contains(log, "done, set by the decider") {
			t.Errorf("%s did not train until done:\n%s", w, log)
		}
		for _, ps := range []string{"ps-0", "ps-1"} {
			if !strings.Contains(c.log(ps), "first call from "+w) {
				t.Errorf("%s never heard from %s", ps, w)
			}
		}
	}
	// Every line names the replica and the step.
	for name := range c.logs {
		for line := range strings.Lines(c.log(name)) {
			if !strings.HasPrefix(line, name+" step=") {
				t.Errorf("line without replica and step: %q", line)
			}
		}
	}

	wantFalling(t, o)
	if ev := eventLosses(t, filepath.Join(o.LogDir, "eval")); len(ev) == 0 || ev[len(ev)-1] >= float32(o.LossThreshold) {
		t.Errorf("evaluator's losses %v: want the last under the threshold", ev)
	}
}

func TestWorkerOnlyClusterWorker0Decides(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeWorker: 2, typePS: 1})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	psCtx, stopPS := context.WithCancel(ctx)
	ps := c.start(psCtx, typePS, 0, o)
	w0 := c.start(ctx, typeWorker, 0, o)
	w1 := c.start(ctx, typeWorker, 1, o)
	wait(t, "worker-0", w0, 0)
	wait(t, "worker-1", w1, 0)
	stopPS()
	wait(t, "ps-0", ps, 0)
	if log := c.log("worker-0"); !strings.Contains(log, "role=decider") || !strings.Contains(log, "converged") {
		t.Errorf("worker-0 did not decide:\n%s", log)
	}
	if log := c.log("worker-1"); strings.Contains(log, "eval_loss") || !strings.Contains(log, "done, set by the decider") {
		t.Errorf("worker-1 should train, not evaluate:\n%s", log)
	}
	if losses := eventLosses(t, o.LogDir); losses[len(losses)-1] >= float32(o.LossThreshold) {
		t.Errorf("losses %v", losses)
	}
}

// Without ps, the decider holds the parameters, and waits for its workers to hear done.
func TestClusterWithoutPS(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeMaster: 1, typeWorker: 1})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w0 := c.start(ctx, typeWorker, 0, o)
	master := c.start(ctx, typeMaster, 0, o)
	wait(t, "master-0", master, 0)
	wait(t, "worker-0", w0, 0)
	if log := c.log("worker-0"); !strings.Contains(log, "done, set by the decider") {
		t.Errorf("worker-0 did not hear done:\n%s", log)
	}
}

func TestNotConvergedExits1(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeMaster: 1, typePS: 1})
	o := testOptions(t)
	o.StepDelay = 0
	o.LossThreshold = 1e-9 // under the noise floor: never reached
	o.MaxSteps = 25
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	psCtx, stopPS := context.WithCancel(ctx)
	ps := c.start(psCtx, typePS, 0, o)
	if code := c.run(ctx, typeMaster, 0, o); code != 1 {
		t.Errorf("master exited %d, want 1", code)
	}
	stopPS()
	wait(t, "ps-0", ps, 0)
	if log := c.log("master-0"); !strings.Contains(log, "did not converge") || !strings.Contains(log, "--max-steps 25") {
		t.Errorf("no clear message:\n%s", log)
	}
	if log := c.log("ps-0"); !strings.Contains(log, "done, set by master-0: not converged") {
		t.Errorf("the master did not stop the workers:\n%s", log)
	}
}

func TestExitAtStep(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeMaster: 1, typeWorker: 1, typePS: 1})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	psCtx, stopPS := context.WithCancel(ctx)
	ps := c.start(psCtx, typePS, 0, o)
	o.ExitCode, o.ExitAtStep = 137, 3
	if code := c.run(ctx, typeWorker, 0, o); code != 137 {
		t.Errorf("worker exited %d, want 137", code)
	}
	if log := c.log("worker-0"); !strings.Contains(log, "exiting with code 137 at own step 3") || strings.Contains(log, "local_step=4 ") {
		t.Errorf("worker did not stop at its step 3:\n%s", log)
	}
	stopPS()
	wait(t, "ps-0", ps, 0)
}

// --exit-once-file fails the first run only, as a pod restarted on a lasting volume would.
func TestExitOnceFile(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeWorker: 1, typePS: 1})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	psCtx, stopPS := context.WithCancel(ctx)
	ps := c.start(psCtx, typePS, 0, o)
	o.ExitCode, o.ExitAtStep, o.ExitOnceFile = 137, 3, filepath.Join(t.TempDir(), "failed-once")
	if code := c.run(ctx, typeWorker, 0, o); code != 137 {
		t.Fatalf("first run exited %d, want 137", code)
	}
	if _, err := os.Stat(o.ExitOnceFile); err != nil {
		t.Fatal(err)
	}
	// The "recreated pod" picks up from the parameters the ps kept.
	if code := c.run(ctx, typeWorker, 0, o); code != 0 {
		t.Fatalf("second run exited %d, want 0:\n%s", code, c.log("worker-0"))
	}
	stopPS()
	wait(t, "ps-0", ps, 0)
}

// A decider that holds the parameters itself (no ps) exits at its own step: the parameters it
// serves beside its training do not use up the --exit-once-file on their own step, which left
// the process running and the next run going on.
func TestExitOnceFileWithoutPS(t *testing.T) {
	c := newTestCluster(t, map[string]int{typeWorker: 1})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	o.ExitCode, o.ExitAtStep, o.ExitOnceFile = 137, 2, filepath.Join(t.TempDir(), "failed-once")
	if code := c.run(ctx, typeWorker, 0, o); code != 137 {
		t.Fatalf("first run exited %d, want 137:\n%s", code, c.log("worker-0"))
	}
	if strings.Count(c.log("worker-0"), "--exit-once-file") != 0 || !strings.Contains(c.log("worker-0"), "exiting with code 137 at own step 2") {
		t.Errorf("the log does not tell one planned exit:\n%s", c.log("worker-0"))
	}
}

func TestPeersNotUpIsRetryable(t *testing.T) {
	cluster := map[string][]string{typeWorker: {deadAddr(t), deadAddr(t)}, typePS: {deadAddr(t)}}
	o := testOptions(t)
	o.PeerTimeout = 200 * time.Millisecond
	var out syncBuffer
	o.Out = &out
	if code := Run(context.Background(), TFConfig{Cluster: cluster, Task: Task{typeWorker, 1}}, o); code != exitPeerTimeout {
		t.Fatalf("exit %d, want %d:\n%s", code, exitPeerTimeout, out.String())
	}
	if !strings.Contains(out.String(), "giving up: ps-0 at") || !strings.Contains(out.String(), "(retryable)") {
		t.Errorf("unclear log:\n%s", out.String())
	}
}

// The context ending is SIGTERM: a trainer that is not done says so with 143.
func TestTerminatedTrainerIsRetryable(t *testing.T) {
	cluster := map[string][]string{typeWorker: {deadAddr(t)}, typePS: {deadAddr(t)}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if code := Run(ctx, TFConfig{Cluster: cluster, Task: Task{typeWorker, 0}}, testOptions(t)); code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
}

func TestCLI(t *testing.T) {
	noEnv := func(string) string { return "" }
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"--help"}, noEnv, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Exit codes") || !strings.Contains(stdout.String(), "-exit-once-file path") {
		t.Errorf("--help: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := cli(nil, noEnv, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "TF_CONFIG is not set") {
		t.Errorf("no TF_CONFIG: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := cli([]string{"--no-such-flag"}, noEnv, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "no-such-flag") {
		t.Errorf("bad flag: exit %d: %s", code, stderr.String())
	}
	cfg, _ := json.Marshal(TFConfig{Cluster: map[string][]string{typeWorker: {"127.0.0.1:1"}}, Task: Task{typeWorker, 0}})
	stdout.Reset()
	if code := cli([]string{"--tf-config", string(cfg), "--exit-code", "137"}, noEnv, &stdout, &stderr); code != exitUsage || !strings.Contains(stdout.String(), "go together") {
		t.Errorf("--exit-code alone: exit %d: %s", code, stdout.String())
	}
}
