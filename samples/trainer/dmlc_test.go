package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// mxJob runs the replicas of an MXJob as goroutines on loopback, each with its own environment
// and options, as the operator would give them to pods.
type mxJob struct {
	*replicaLogs
	t   *testing.T
	env map[string]string // what every replica gets: DMLC_PS_ROOT_URI and the others
	ln  net.Listener      // the scheduler's, opened up front so no port is raced for
}

func newMXJob(t *testing.T, servers, workers int) *mxJob {
	ln := listenLoopback(t)
	return &mxJob{replicaLogs: newReplicaLogs(t), t: t, ln: ln, env: map[string]string{
		envDMLCRootURI:   "127.0.0.1",
		envDMLCRootPort:  fmt.Sprint(ln.Addr().(*net.TCPAddr).Port),
		envDMLCNumServer: fmt.Sprint(servers),
		envDMLCNumWorker: fmt.Sprint(workers),
	}}
}

// start runs a replica of role, named label in the test, with hostname and extra environment;
// the channel yields its exit code.
func (j *mxJob) start(ctx context.Context, label, role, hostname string, extra map[string]string, o Options) <-chan int {
	j.t.Helper()
	env := maps.Clone(j.env)
	env[envDMLCRole] = role
	maps.Copy(env, extra)
	cfg, err := loadDMLCConfig(func(k string) string { return env[k] })
	if err != nil {
		j.t.Fatal(err)
	}
	o.Out, o.Hostname = j.add(label), hostname
	switch role {
	case roleScheduler:
		o.Listener = j.ln
	case roleServer:
		o.Port = 0
	}
	done := make(chan int, 1)
	go func() { done <- RunDMLC(ctx, cfg, o) }()
	return done
}

var dmlcLineRE = regexp.MustCompile(`^(scheduler-0|server-[0-9?]|worker-[0-9?]) step=[0-9]+ `)

// checkLines checks that every line names the replica and the step, and that once a replica
// knows its index, it says so on every line.
func (j *mxJob) checkLines() {
	for label := range j.logs {
		named := false
		for line := range strings.Lines(j.log(label)) {
			m := dmlcLineRE.FindStringSubmatch(line)
			switch {
			case m == nil:
				j.t.Errorf("%s: line without replica and step: %q", label, line)
			case named && strings.HasSuffix(m[1], "?"):
				j.t.Errorf("%s: line without index after registering: %q", label, line)
			}
			named = named || (m != nil && !strings.HasSuffix(m[1], "?"))
		}
	}
}

func TestDMLCSchedulerServersWorkers(t *testing.T) {
	j := newMXJob(t, 2, 2)
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	serversCtx, stopServers := context.WithCancel(ctx)
	defer stopServers()

	sched := j.start(ctx, "scheduler", roleScheduler, "test", nil, o)
	// A worker in an MXJob pod takes its index from its hostname; the other, outside, gets the
	// next free one when it registers.
	wa := j.start(ctx, "worker-a", roleWorker, "mx-worker-1", nil, o)
	wb := j.start(ctx, "worker-b", roleWorker, "laptop", nil, o)
	// Servers come late, so that the workers wait for the list; one announces POD_IP, the other
	// lets the scheduler take the address it calls from.
	time.Sleep(300 * time.Millisecond)
	sa := j.start(serversCtx, "server-a", roleServer, "test", map[string]string{envPodIP: "127.0.0.1"}, o)
	sb := j.start(serversCtx, "server-b", roleServer, "test", nil, o)

	wait(t, "scheduler", sched, 0)
	wait(t, "worker-a", wa, 0)
	wait(t, "worker-b", wb, 0)
	// Like a TfJob's ps, a server serves until SIGTERM (the context), then exits 0.
	stillRunning(t, "server-a", sa)
	stopServers()
	wait(t, "server-a", sa, 0)
	wait(t, "server-b", sb, 0)

	slog := j.log("scheduler")
	for _, want := range []string{"all 2 servers have registered", "converged: eval loss", "all 2 worker(s) finished; exiting 0", "worker-1 finished"} {
		if !strings.Contains(slog, want) {
			t.Errorf("scheduler log lacks %q:\n%s", want, slog)
		}
	}
	if lastEvalLoss(t, slog) > o.LossThreshold {
		t.Errorf("scheduler did not converge:\n%s", slog)
	}
	if !strings.HasPrefix(slog, "scheduler-0 step=0 dmlc role=scheduler scheduler=127.0.0.1:") {
		t.Errorf("the first line does not say who this is:\n%s", slog)
	}

	shards := map[string]bool{}
	for _, s := range []string{"server-a", "server-b"} {
		log := j.log(s)
		m := regexp.MustCompile(`registered with scheduler-0: shard (\d) of 2, workers reach it at 127\.0\.0\.1:\d+`).FindStringSubmatch(log)
		if m == nil {
			t.Fatalf("%s did not register:\n%s", s, log)
		}
		shards[m[1]] = true
		for _, want := range []string{"first call from worker-0", "first call from worker-1", "done, set by scheduler-0: converged"} {
			if !strings.Contains(log, want) {
				t.Errorf("%s log lacks %q", s, want)
			}
		}
	}
	if len(shards) != 2 {
		t.Errorf("both servers got the same shard: %v", shards)
	}

	if log := j.log("worker-a"); !strings.HasPrefix(log, "worker-1 step=0 dmlc role=worker") {
		t.Errorf("worker-a is not worker-1 from the start, as its hostname says:\n%s", log)
	}
	if log := j.log("worker-b"); !strings.HasPrefix(log, "worker-? step=0 ") || !strings.Contains(log, "worker-0 step=") {
		t.Errorf("worker-b should be worker-? until it registers as worker-0:\n%s", log)
	}
	for _, w := range []string{"worker-a", "worker-b"} {
		if log := j.log(w); !strings.Contains(log, "local_step=1 ") || !strings.Contains(log, "done, set by the decider") {
			t.Errorf("%s did not train until done:\n%s", w, log)
		}
	}
	j.checkLines()

	losses := eventLosses(t, o.LogDir)
	if len(losses) < 3 || losses[0] < 5 || losses[len(losses)-1] >= float32(o.LossThreshold) {
		t.Fatalf("losses %v: want several, from about 10 to under %g", losses, o.LossThreshold)
	}
}

// With DMLC_NUM_SERVER=0 the scheduler holds the parameters, as a TfJob's decider without ps.
func TestDMLCWithoutServers(t *testing.T) {
	j := newMXJob(t, 0, 2)
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w0 := j.start(ctx, "worker-0", roleWorker, "mx-worker-0", nil, o)
	w1 := j.start(ctx, "worker-1", roleWorker, "mx-worker-1", nil, o)
	sched := j.start(ctx, "scheduler", roleScheduler, "test", nil, o)
	wait(t, "scheduler", sched, 0)
	wait(t, "worker-0", w0, 0)
	wait(t, "worker-1", w1, 0)
	slog := j.log("scheduler")
	for _, want := range []string{"DMLC_NUM_SERVER=0: holding parameters", "converged", "all 2 worker(s) finished"} {
		if !strings.Contains(slog, want) {
			t.Errorf("scheduler log lacks %q:\n%s", want, slog)
		}
	}
	if log := j.log("worker-1"); !strings.Contains(log, "parameters on scheduler-0=127.0.0.1:") || !strings.Contains(log, "done, set by the decider") {
		t.Errorf("worker-1 did not train on the scheduler's parameters:\n%s", log)
	}
	j.checkLines()
}

func TestDMLCSchedulerGivesUpOnServers(t *testing.T) {
	j := newMXJob(t, 1, 1)
	o := testOptions(t)
	o.PeerTimeout = 200 * time.Millisecond
	if code := <-j.start(context.Background(), "scheduler", roleScheduler, "test", nil, o); code != exitPeerTimeout {
		t.Fatalf("exit %d, want %d", code, exitPeerTimeout)
	}
	if log := j.log("scheduler"); !strings.Contains(log, "0 of 1 servers registered within --peer-timeout") {
		t.Errorf("unclear log:\n%s", log)
	}
}

func TestDMLCRegistry(t *testing.T) {
	cfg := DMLCConfig{Role: roleScheduler, RootURI: "127.0.0.1", NumServer: 2, NumWorker: 1}
	mux := http.NewServeMux()
	reg := newRegistry(cfg, newLogger(io.Discard, "scheduler-0"))
	reg.routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	cfg.RootURI = host
	fmt.Sscan(port, &cfg.RootPort)
	ctx := context.Background()
	client := func(podIP string) *schedulerClient {
		c := cfg
		c.PodIP = podIP
		o := defaultOptions()
		o.PeerTimeout = time.Second
		return newSchedulerClient(c, o, newLogger(io.Discard, "test"))
	}

	a, b, c := client("10.0.0.7"), client(""), client("")
	if r, err := a.register(ctx, roleServer, -1, 9091); err != nil || r.Index != 0 || r.Addr != "10.0.0.7:9091" || r.NumServer != 2 {
		t.Fatalf("first server: %+v %v", r, err)
	}
	// Registering again (a heartbeat) keeps the index.
	if r, err := a.register(ctx, roleServer, -1, 9091); err != nil || r.Index != 0 {
		t.Fatalf("a again: %+v %v", r, err)
	}
	// Without POD_IP, the address the call comes from.
	if r, err := b.register(ctx, roleServer, -1, 9092); err != nil || r.Index != 1 || r.Addr != "127.0.0.1:9092" {
		t.Fatalf("second server: %+v %v", r, err)
	}
	var rejected *rejectedError
	if _, err := c.register(ctx, roleServer, -1, 9093); !errors.As(err, &rejected) || rejected.status != http.StatusConflict || !strings.Contains(err.Error(), "all 2 servers have registered") {
		t.Fatalf("a third server: %v", err)
	}
	// A recreated pod asks for the index its hostname gives it, and takes it over.
	if r, err := c.register(ctx, roleServer, 1, 9093); err != nil || r.Index != 1 {
		t.Fatalf("server-1 recreated: %+v %v", r, err)
	}
	if _, err := c.register(ctx, roleWorker, 1, 0); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "worker index 1 is not under 1") {
		t.Fatalf("worker index out of range: %v", err)
	}
	other := client("")
	other.cfg.NumWorker = 3
	if _, err := other.register(ctx, roleWorker, -1, 0); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "DMLC_NUM_WORKER=1, this worker 2 and 3: the replicas disagree") {
		t.Fatalf("counts that disagree: %v", err)
	}

	reg.start()
	shards, err := b.servers(ctx)
	if err != nil || peerList(shards) != "server-0=10.0.0.7:9091,server-1=127.0.0.1:9093" {
		t.Fatalf("servers: %v %v", peerList(shards), err)
	}
	if err := b.finished(ctx, 0); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"num_server":2,"num_worker":1,"servers":["10.0.0.7:9091","127.0.0.1:9093"],"workers_registered":0,"workers_finished":1}`; strings.TrimSpace(string(body)) != want {
		t.Errorf("/v1/cluster = %s, want %s", body, want)
	}
}

// A worker asks for the servers until all have registered.
func TestDMLCServersNotYetRegistered(t *testing.T) {
	cfg := DMLCConfig{RootURI: "127.0.0.1", NumServer: 1, NumWorker: 1}
	mux := http.NewServeMux()
	reg := newRegistry(cfg, newLogger(io.Discard, "scheduler-0"))
	reg.longPoll = 10 * time.Millisecond
	reg.routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o := defaultOptions()
	o.PeerTimeout = 300 * time.Millisecond
	var out syncBuffer
	c := newSchedulerClient(cfg, o, newLogger(&out, "worker-0"))
	c.scheduler.addr = strings.TrimPrefix(srv.URL, "http://")
	var unreachable *unreachableError
	if _, err := c.servers(context.Background()); !errors.As(err, &unreachable) {
		t.Fatalf("err = %v, want unreachable", err)
	}
	if !strings.Contains(out.String(), "HTTP 503: 0 of 1 servers have registered") {
		t.Errorf("log does not say what it waits for:\n%s", out.String())
	}
}

func TestLoadDMLCConfig(t *testing.T) {
	base := map[string]string{
		envDMLCRole: "WORKER", envDMLCRootURI: "mx-scheduler-0.ns.svc", envDMLCRootPort: "9091",
		envDMLCNumServer: "2", envDMLCNumWorker: "3",
	}
	get := func(change map[string]string) func(string) string {
		env := maps.Clone(base)
		maps.Copy(env, change)
		return func(k string) string { return env[k] }
	}
	c, err := loadDMLCConfig(get(map[string]string{envPodIP: "10.0.0.7"}))
	if want := (DMLCConfig{Role: roleWorker, RootURI: "mx-scheduler-0.ns.svc", RootPort: 9091, NumServer: 2, NumWorker: 3, PodIP: "10.0.0.7"}); err != nil || c != want {
		t.Fatalf("got %+v %v, want %+v", c, err, want)
	}
	if c.Root() != "mx-scheduler-0.ns.svc:9091" {
		t.Errorf("Root() = %s", c.Root())
	}
	for _, tc := range []struct {
		change map[string]string
		want   string
	}{
		{map[string]string{envDMLCRootURI: ""}, "DMLC_PS_ROOT_URI is not set"},
		{map[string]string{envDMLCRole: "boss"}, `DMLC_ROLE="boss" is not one of scheduler, server, worker`},
		{map[string]string{envDMLCRootPort: ""}, "DMLC_PS_ROOT_PORT is not set"},
		{map[string]string{envDMLCRootPort: "http"}, `DMLC_PS_ROOT_PORT="http" is not an integer`},
		{map[string]string{envDMLCRootPort: "70000"}, "DMLC_PS_ROOT_PORT=70000 is not a port"},
		{map[string]string{envDMLCNumServer: "-1"}, `DMLC_NUM_SERVER="-1" is not an integer of at least 0`},
		{map[string]string{envDMLCNumWorker: "0"}, "needs a WORKER group"},
		{map[string]string{envPodIP: "pod"}, `POD_IP="pod" is not an IP address`},
		{map[string]string{envDMLCRole: "server", envDMLCNumServer: "0"}, "the replicas disagree"},
	} {
		if _, err := loadDMLCConfig(get(tc.change)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.change, err, tc.want)
		}
	}
}

func TestDMLCCLI(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	var stdout, stderr bytes.Buffer
	if code := cli(nil, env(map[string]string{envDMLCRole: "worker"}), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "DMLC_PS_ROOT_URI is not set") {
		t.Errorf("no DMLC_PS_ROOT_URI: exit %d: %s", code, stderr.String())
	}
	// TF_CONFIG wins over DMLC_ROLE: a TfJob's replica is never taken for an MXJob's.
	if useDMLC("", env(map[string]string{envTFConfig: "{}", envDMLCRole: "worker"})) || useDMLC(`{}`, env(map[string]string{envDMLCRole: "worker"})) {
		t.Error("DMLC mode despite TF_CONFIG")
	}
	if !useDMLC("", env(map[string]string{envDMLCRole: "scheduler"})) {
		t.Error("no DMLC mode with DMLC_ROLE alone")
	}
}

func TestHostIndex(t *testing.T) {
	for _, tc := range []struct {
		host, role string
		want       int
	}{
		{"mx-worker-1", roleWorker, 1},
		{"my-job-server-0", roleServer, 0},
		{"server-1", roleServer, 1},
		{"mx-worker-1", roleServer, -1}, // another role's
		{"mx-worker-2", roleWorker, -1}, // past DMLC_NUM_WORKER
		{"mx-worker-01", roleWorker, -1},
		{"mx-worker-x", roleWorker, -1},
		{"ip-10-0-0-1", roleWorker, -1},
		{"laptop", roleWorker, -1},
		{"", roleWorker, -1},
	} {
		if got := hostIndex(tc.host, tc.role, 2); got != tc.want {
			t.Errorf("hostIndex(%q, %s) = %d, want %d", tc.host, tc.role, got, tc.want)
		}
	}
}
