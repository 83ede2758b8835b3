package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// rankJob runs the ranks of a PyTorchJob or JAXJob as goroutines on loopback, each with the
// environment the operator would give its pod.
type rankJob struct {
	*replicaLogs
	t       *testing.T
	env     map[string]string // what every rank gets: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, or the JAX ones
	rankVar string            // the variable that tells a rank its rank: RANK, PROCESS_ID
	run     runner
	ln      net.Listener    // rank 0's, opened up front so no port is raced for
	ctx     context.Context // ends with the test, or after 15s: a rank that hangs then stops with 143
	o       Options         // testOptions, for the ranks that need no others
}

// runner loads a mode's config from an environment and gives the function that runs it.
type runner func(getenv func(string) string) (func(context.Context, Options) int, error)

// runnerOf is the runner of a mode: its loader and its Run.
func runnerOf[C any](load func(func(string) string) (C, error), run func(context.Context, C, Options) int) runner {
	return func(getenv func(string) string) (func(context.Context, Options) int, error) {
		cfg, err := load(getenv)
		return func(ctx context.Context, o Options) int { return run(ctx, cfg, o) }, err
	}
}

// newRankJob is a job of world ranks whose rank 0 listens where addrVar and portVar say.
func newRankJob(t *testing.T, world int, addrVar, portVar, sizeVar, rankVar string, run runner) *rankJob {
	ln := listenLoopback(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return &rankJob{replicaLogs: newReplicaLogs(t), t: t, ln: ln, ctx: ctx, o: testOptions(t), rankVar: rankVar, run: run, env: map[string]string{
		addrVar: "127.0.0.1",
		portVar: fmt.Sprint(ln.Addr().(*net.TCPAddr).Port),
		sizeVar: fmt.Sprint(world),
	}}
}

func newPTJob(t *testing.T, world int) *rankJob {
	return newRankJob(t, world, envMasterAddr, envMasterPort, envWorldSize, envRank, runnerOf(loadPyTorchConfig, RunPyTorch))
}

// start runs rank, named label in the test, with the environment changed by change (an empty
// value unsets a variable); the channel yields its exit code.
func (j *rankJob) start(label string, rank int, change map[string]string, o Options) <-chan int {
	j.t.Helper()
	env := maps.Clone(j.env)
	env[j.rankVar] = fmt.Sprint(rank)
	maps.Copy(env, change)
	run, err := j.run(func(k string) string { return env[k] })
	if err != nil {
		j.t.Fatal(err)
	}
	o.Out, o.Hostname = j.add(label), "test"
	if rank == 0 {
		o.Listener = j.ln
	}
	done := make(chan int, 1)
	go func() { done <- run(j.ctx, o) }()
	return done
}

// checkLines checks that every line of label's log starts with the replica's name and the step.
func (j *rankJob) checkLines(label, name string) {
	for line := range strings.Lines(j.log(label)) {
		if !strings.HasPrefix(line, name+" step=") {
			j.t.Errorf("%s: line without %s and the step: %q", label, name, line)
		}
	}
}

// wantConverged fails the test unless the log of rank 0, label, ends with converging.
func (j *rankJob) wantConverged(label string) {
	j.t.Helper()
	converged := regexp.MustCompile(`\n` + regexp.QuoteMeta(label) + ` step=\d+ converged: eval loss 0\.\d{4} < 0\.01; exiting 0\n$`)
	if log := j.log(label); !converged.MatchString(log) || lastEvalLoss(j.t, log) > 0.01 {
		j.t.Errorf("%s did not end with converged:\n%s", label, log)
	}
}

func TestPyTorchMasterWorkers(t *testing.T) {
	j := newPTJob(t, 4)
	o := j.o

	// Workers first: they wait for the master, as pods starting in any order do. The operator
	// sets the PET_* spellings too; worker-2 has only those.
	port := j.env[envMasterPort]
	pet := map[string]string{envPETMasterAddr: "127.0.0.1", envPETMasterPort: port, envPETNNodes: "4", envPETNProcPerNode: "1"}
	workers := []<-chan int{j.start("worker-0", 1, pet, o), j.start("worker-1", 2, nil, o)}
	only := maps.Clone(pet)
	maps.Copy(only, map[string]string{envPETNodeRank: "3", envMasterAddr: "", envMasterPort: "", envWorldSize: "", envRank: ""})
	workers = append(workers, j.start("worker-2", 3, only, o))
	time.Sleep(100 * time.Millisecond)
	master := j.start("master-0", 0, pet, o)

	wait(t, "master-0", master, 0)
	for i, w := range workers {
		wait(t, fmt.Sprintf("worker-%d", i), w, 0)
	}

	j.wantConverged("master-0")
	wantInLog(t, "master-0", j.log("master-0"),
		"master-0 step=0 pytorch rank=0 world_size=4 master=127.0.0.1:"+port+" from=MASTER_ADDR,MASTER_PORT,WORLD_SIZE,RANK sync_every=5",
		"worker-0 (rank 1) joined", "worker-2 (rank 3) joined", "averaged with 4 ranks: round=1 ")
	j.checkLines("master-0", "master-0")
	for i := range 3 {
		name := fmt.Sprintf("worker-%d", i)
		wantInLog(t, name, j.log(name),
			fmt.Sprintf("joined master-0 at 127.0.0.1:%s as rank %d of 4, at round 0", port, i+1),
			name+" step=5 averaged with 4 ranks: round=1 local_step=5 ",
			"done, set by the decider (converged: eval loss")
		j.checkLines(name, name)
	}
	wantInLog(t, "worker-2", j.log("worker-2"), "from=PET_MASTER_ADDR,PET_MASTER_PORT,PET_NNODES,PET_NODE_RANK")

	wantFalling(t, o)
}

// A job of one rank: the master trains alone.
func TestPyTorchMasterAlone(t *testing.T) {
	j := newPTJob(t, 1)
	o := j.o
	o.StepDelay = 0
	wait(t, "master-0", j.start("master-0", 0, nil, o), 0)
	j.wantConverged("master-0")
	wantInLog(t, "master-0", j.log("master-0"), "averaged with 1 ranks")
}

func TestPyTorchWorkerCannotReachMaster(t *testing.T) {
	addr := deadAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	env := map[string]string{envPETMasterAddr: host, envPETMasterPort: port, envPETNNodes: "2", envPETNodeRank: "1"}
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"--peer-timeout=300ms"}, func(k string) string { return env[k] }, &stdout, &stderr); code != exitPeerTimeout {
		t.Fatalf("exit %d, want %d:\n%s%s", code, exitPeerTimeout, stdout.String(), stderr.String())
	}
	wantInLog(t, "worker-0", stdout.String(),
		"worker-0 step=0 pytorch rank=1 world_size=2 master="+addr,
		"worker-0 step=0 waiting for master-0 at "+addr+" (gives up after 300ms): ",
		"worker-0 step=0 giving up: master-0 at "+addr+" did not answer for ",
		"connection refused; exiting 142 (retryable)\n")
}

// The master waits for every rank for --peer-timeout, then gives up, and says whom it waited for.
func TestPyTorchMasterGivesUpOnWorkers(t *testing.T) {
	j := newPTJob(t, 3)
	o := j.o
	o.PeerTimeout = 300 * time.Millisecond
	w0 := j.start("worker-0", 1, nil, o)
	wait(t, "master-0", j.start("master-0", 0, nil, o), exitPeerTimeout)
	// The master gone, worker-0 waits for it in turn.
	wait(t, "worker-0", w0, exitPeerTimeout)
	wantInLog(t, "master-0", j.log("master-0"), "giving up: round 0 waits for worker-1 (rank 2) within --peer-timeout 300ms; exiting 142 (retryable)")
	wantInLog(t, "worker-0", j.log("worker-0"), "giving up: master-0 at")
}

// A worker with --exit-at-step fails; its recreated pod joins again and the job converges. With
// --exit-once-file, the same flags fail only the first run.
func TestPyTorchWorkerRestarts(t *testing.T) {
	j := newPTJob(t, 3)
	o := j.o
	master := j.start("master-0", 0, nil, o)
	w1 := j.start("worker-1", 2, nil, o)
	failing := o
	failing.ExitCode, failing.ExitAtStep, failing.ExitOnceFile = 137, 3, filepath.Join(t.TempDir(), "failed-once")
	wait(t, "worker-0", j.start("worker-0", 1, nil, failing), 137)
	wantInLog(t, "worker-0", j.log("worker-0"), "exiting with code 137 at own step 3")
	w0 := j.start("worker-0 again", 1, nil, failing)
	wait(t, "master-0", master, 0)
	wait(t, "worker-0 again", w0, 0)
	wait(t, "worker-1", w1, 0)
	j.wantConverged("master-0")
	wantInLog(t, "master-0", j.log("master-0"), "worker-0 (rank 1) joined again, a new process")
	wantInLog(t, "worker-0 again", j.log("worker-0 again"), "--exit-once-file", "done, set by the decider")
}

// A recreated master starts again from zero; the workers, which wait for it meanwhile, go on from
// its parameters.
func TestPyTorchMasterRestarts(t *testing.T) {
	j := newPTJob(t, 2)
	o := j.o
	w0 := j.start("worker-0", 1, nil, o)
	failing := o
	failing.ExitCode, failing.ExitAtStep = 137, 8 // in round 1, after the first average
	wait(t, "master-0", j.start("master-0", 0, nil, failing), 137)
	ln, err := net.Listen("tcp", j.ln.Addr().String())
	if err != nil {
		t.Skipf("cannot listen again on the master's port: %v", err)
	}
	j.ln = ln
	wait(t, "master-0 again", j.start("master-0 again", 0, nil, o), 0)
	wait(t, "worker-0", w0, 0)
	wantInLog(t, "worker-0", j.log("worker-0"),
		"master-0 is at round 0, not 2 (it restarted, or this worker did): going on from its parameters",
		"done, set by the decider (converged")
}

// At --max-steps the master fails (exit 1) and tells the workers done, which exit 0.
func TestPyTorchNotConverged(t *testing.T) {
	j := newPTJob(t, 2)
	o := j.o
	o.LossThreshold = 1e-9 // under the noise floor: never reached
	o.MaxSteps = 25
	w0 := j.start("worker-0", 1, nil, o)
	wait(t, "master-0", j.start("master-0", 0, nil, o), exitFailed)
	wait(t, "worker-0", w0, 0)
	wantInLog(t, "master-0", j.log("master-0"), "did not converge: eval loss", "after --max-steps 25; exiting 1")
	wantInLog(t, "worker-0", j.log("worker-0"), "done, set by the decider (not converged")
}

// A worker whose WORLD_SIZE differs from the master's is refused for good (exit 1); the job goes
// on with the right one.
func TestPyTorchWorldSizeDisagrees(t *testing.T) {
	j := newPTJob(t, 2)
	o := j.o
	master := j.start("master-0", 0, nil, o)
	wait(t, "bad worker", j.start("bad worker", 1, map[string]string{envWorldSize: "3"}, o), exitFailed)
	wantInLog(t, "bad worker", j.log("bad worker"), "refused the request (HTTP 409): the master has WORLD_SIZE=2, rank 1 has 3: the replicas disagree")
	w0 := j.start("worker-0", 1, nil, o)
	wait(t, "master-0", master, 0)
	wait(t, "worker-0", w0, 0)
}

// The context ending is SIGTERM: a rank that is not done exits 143.
func TestPyTorchTerminated(t *testing.T) {
	j := newPTJob(t, 2)
	var cancel context.CancelFunc
	j.ctx, cancel = context.WithCancel(j.ctx)
	master := j.start("master-0", 0, nil, j.o)
	cancel()
	wait(t, "master-0", master, exitInterrupted)
	wantInLog(t, "master-0", j.log("master-0"), "stopping before done: context canceled; exiting 143")
}

func TestLoadPyTorchConfig(t *testing.T) {
	plain := map[string]string{envMasterAddr: "job-master-0.ns.svc.cluster.local", envMasterPort: "23456", envWorldSize: "3", envRank: "2"}
	pet := map[string]string{envPETMasterAddr: "pet-master-0.ns.svc", envPETMasterPort: "29500", envPETNNodes: "4", envPETNodeRank: "1", envPETNProcPerNode: "1"}
	get := func(sets ...map[string]string) func(string) string {
		env := map[string]string{}
		for _, s := range sets {
			maps.Copy(env, s)
		}
		return func(k string) string { return env[k] }
	}
	for _, tc := range []struct {
		name string
		env  func(string) string
		want PyTorchConfig
	}{
		{"plain", get(plain), PyTorchConfig{"job-master-0.ns.svc.cluster.local", 23456, 3, 2, []string{envMasterAddr, envMasterPort, envWorldSize, envRank}}},
		{"PET_*", get(pet), PyTorchConfig{"pet-master-0.ns.svc", 29500, 4, 1, []string{envPETMasterAddr, envPETMasterPort, envPETNNodes, envPETNodeRank}}},
		{"both: plain wins", get(pet, plain), PyTorchConfig{"job-master-0.ns.svc.cluster.local", 23456, 3, 2, []string{envMasterAddr, envMasterPort, envWorldSize, envRank}}},
		{"some of each", get(pet, map[string]string{envRank: "0"}), PyTorchConfig{"pet-master-0.ns.svc", 29500, 4, 0, []string{envPETMasterAddr, envPETMasterPort, envPETNNodes, envRank}}},
		{"IPv6", get(plain, map[string]string{envMasterAddr: "[fd00::1]"}), PyTorchConfig{"fd00::1", 23456, 3, 2, []string{envMasterAddr, envMasterPort, envWorldSize, envRank}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadPyTorchConfig(tc.env)
			if err != nil || fmt.Sprint(c) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v %v, want %+v", c, err, tc.want)
			}
		})
	}
	if c, _ := loadPyTorchConfig(get(plain)); c.Master() != "job-master-0.ns.svc.cluster.local:23456" || c.Name() != "worker-1" {
		t.Errorf("Master() = %s, Name() = %s", c.Master(), c.Name())
	}
	if c, _ := loadPyTorchConfig(get(plain, map[string]string{envMasterAddr: "fd00::1"})); c.Master() != "[fd00::1]:23456" {
		t.Errorf("Master() = %s", c.Master())
	}

	for _, tc := range []struct {
		env  func(string) string
		want string
	}{
		{get(plain, map[string]string{envMasterAddr: ""}), "MASTER_ADDR (or torchrun's PET_MASTER_ADDR) is not set: the PyTorchJob operator sets it"},
		{get(plain, map[string]string{envMasterPort: ""}), "MASTER_PORT (or torchrun's PET_MASTER_PORT) is not set"},
		{get(plain, map[string]string{envWorldSize: ""}), "WORLD_SIZE (or torchrun's PET_NNODES) is not set"},
		{get(plain, map[string]string{envRank: ""}), "RANK (or torchrun's PET_NODE_RANK) is not set"},
		{get(plain, map[string]string{envMasterAddr: "job-master-0:23456"}), `MASTER_ADDR="job-master-0:23456" has a port: it is the master's host, and the port goes in MASTER_PORT`},
		{get(plain, map[string]string{envMasterAddr: "http://job-master-0"}), `MASTER_ADDR="http://job-master-0" is not a host name or IP address`},
		{get(plain, map[string]string{envMasterPort: "pytorch"}), `MASTER_PORT="pytorch" is not an integer of at least 1`},
		{get(plain, map[string]string{envMasterPort: "0"}), `MASTER_PORT="0" is not an integer of at least 1`},
		{get(pet, map[string]string{envPETMasterPort: "70000"}), "PET_MASTER_PORT=70000 is not a port (1-65535)"},
		{get(plain, map[string]string{envWorldSize: "0"}), `WORLD_SIZE="0" is not an integer of at least 1`},
		{get(pet, map[string]string{envPETNNodes: "1:3"}), `PET_NNODES="1:3" is not an integer of at least 1 (an elastic min:max range is not supported`},
		{get(plain, map[string]string{envRank: "-1"}), `RANK="-1" is not an integer of at least 0`},
		{get(plain, map[string]string{envRank: "3"}), "RANK=3 is not under WORLD_SIZE=3: the master is rank 0 and the workers 1 to 2"},
		{get(pet, map[string]string{envPETNodeRank: "4"}), "PET_NODE_RANK=4 is not under PET_NNODES=4"},
		{get(pet, map[string]string{envPETNProcPerNode: "4"}), `PET_NPROC_PER_NODE="4": the trainer is one process per pod, so it must be 1`},
	} {
		if _, err := loadPyTorchConfig(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want an error with %q", err, tc.want)
		}
	}
}

func TestPyTorchCLI(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	var stdout, stderr bytes.Buffer
	if code := cli(nil, env(map[string]string{envRank: "1", envWorldSize: "2"}), &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "MASTER_ADDR (or torchrun's PET_MASTER_ADDR) is not set") {
		t.Errorf("no MASTER_ADDR: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := cli([]string{"--sync-every=0"}, env(map[string]string{envPETMasterAddr: "m", envPETMasterPort: "1", envPETNNodes: "1", envPETNodeRank: "0"}), &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stdout.String(), "--sync-every must be at least 1") {
		t.Errorf("--sync-every=0: exit %d: %s", code, stdout.String())
	}
	// TF_CONFIG, then DMLC_ROLE, win over the PyTorch variables.
	torch := map[string]string{envMasterAddr: "m", envPETNNodes: "2"}
	for _, tc := range []struct {
		flag string
		env  map[string]string
		want bool
	}{
		{"", torch, true},
		{"", map[string]string{envPETMasterAddr: "m"}, true},
		{"", map[string]string{envRank: "0"}, true},
		{"", map[string]string{}, false},
		{`{}`, torch, false},
		{"", map[string]string{envTFConfig: "{}", envMasterAddr: "m"}, false},
		{"", map[string]string{envDMLCRole: "worker", envMasterAddr: "m"}, false},
	} {
		if got := usePyTorch(tc.flag, env(tc.env)); got != tc.want {
			t.Errorf("usePyTorch(%q, %v) = %v, want %v", tc.flag, tc.env, got, tc.want)
		}
	}
	stdout.Reset()
	if code := cli([]string{"--help"}, env(nil), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "PyTorch mode") || !strings.Contains(stdout.String(), "-sync-every steps") {
		t.Errorf("--help lacks PyTorch mode:\n%s", stdout.String())
	}
}
