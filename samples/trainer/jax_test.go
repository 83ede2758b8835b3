package main

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// newJAXJob runs the processes of a JAXJob as goroutines on loopback (rankJob, pytorch_test.go),
// each with the variables the operator sets: COORDINATOR_ADDRESS, COORDINATOR_PORT,
// NUM_PROCESSES, and PROCESS_ID by process.
func newJAXJob(t *testing.T, processes int) *rankJob {
	return newRankJob(t, processes, envCoordinatorAddress, envCoordinatorPort, envNumProcesses, envProcessID, runnerOf(loadJAXConfig, RunJAX))
}

// Every process registers with the coordinator, process 0, and none trains until all have: the
// coordinator's port is up before the others are, or after, and the job converges either way.
func TestJAXWorkers(t *testing.T) {
	j := newJAXJob(t, 4)
	o := j.o
	port := j.env[envCoordinatorPort]

	// Process 1 before the coordinator: its call waits for it, as pods starting in any order do.
	// Then the coordinator, then process 2: none goes on while process 3 has not registered.
	w1 := j.start("worker-1", 1, nil, o)
	time.Sleep(100 * time.Millisecond)
	w0 := j.start("worker-0", 0, nil, o)
	w2 := j.start("worker-2", 2, nil, o)
	time.Sleep(300 * time.Millisecond)
	for _, label := range []string{"worker-0", "worker-1", "worker-2"} {
		if log := j.log(label); strings.Contains(log, "averaged with") || strings.Contains(log, "joined worker-0") {
			t.Fatalf("%s went on before every process registered:\n%s", label, log)
		}
	}
	w3 := j.start("worker-3", 3, nil, o)

	for i, w := range []<-chan int{w0, w1, w2, w3} {
		wait(t, fmt.Sprintf("worker-%d", i), w, 0)
	}
	j.wantConverged("worker-0")
	wantInLog(t, "worker-0", j.log("worker-0"),
		"worker-0 step=0 jax process_id=0 num_processes=4 coordinator=127.0.0.1:"+port+" sync_every=5",
		"worker-1 (rank 1) joined", "worker-3 (rank 3) joined (4 of 4 ranks)", "all 4 ranks have joined",
		"averaged with 4 ranks: round=1 ")
	j.checkLines("worker-0", "worker-0")
	for i := 1; i < 4; i++ {
		name := fmt.Sprintf("worker-%d", i)
		wantInLog(t, name, j.log(name),
			fmt.Sprintf("%s step=0 jax process_id=%d num_processes=4", name, i),
			fmt.Sprintf("joined worker-0 at 127.0.0.1:%s as rank %d of 4, at round 0", port, i),
			name+" step=5 averaged with 4 ranks: round=1 local_step=5 ",
			"done, set by the decider (converged: eval loss")
		j.checkLines(name, name)
	}
	wantFalling(t, o)
}

// A job of one process: the coordinator has all it waits for, and trains alone.
func TestJAXAlone(t *testing.T) {
	j := newJAXJob(t, 1)
	o := j.o
	o.StepDelay = 0
	wait(t, "worker-0", j.start("worker-0", 0, nil, o), 0)
	j.wantConverged("worker-0")
	wantInLog(t, "worker-0", j.log("worker-0"), "all 1 ranks have joined", "averaged with 1 ranks")
}

// A process that does not register within --peer-timeout fails the rendezvous, as
// jax.distributed.initialize's initialization_timeout does: the coordinator exits 142 (retryable)
// naming whom it waited for, and a process waiting at the registration then gives up on it.
func TestJAXCoordinatorGivesUpOnRegistration(t *testing.T) {
	j := newJAXJob(t, 3)
	o := j.o
	o.PeerTimeout = 300 * time.Millisecond
	w1 := j.start("worker-1", 1, nil, o)
	wait(t, "worker-0", j.start("worker-0", 0, nil, o), exitPeerTimeout)
	wait(t, "worker-1", w1, exitPeerTimeout)
	wantInLog(t, "worker-0", j.log("worker-0"), "giving up: waiting for worker-2 (rank 2) to join within --peer-timeout 300ms; exiting 142 (retryable)")
	wantInLog(t, "worker-1", j.log("worker-1"), "giving up: worker-0 at")
}

// A process whose NUM_PROCESSES differs from the coordinator's is refused for good (exit 1).
func TestJAXNumProcessesDisagrees(t *testing.T) {
	j := newJAXJob(t, 2)
	o := j.o
	w0 := j.start("worker-0", 0, nil, o)
	wait(t, "bad worker", j.start("bad worker", 1, map[string]string{envNumProcesses: "3"}, o), exitFailed)
	wantInLog(t, "bad worker", j.log("bad worker"), "refused the request (HTTP 409): the coordinator has NUM_PROCESSES=2, rank 1 has 3: the replicas disagree")
	w1 := j.start("worker-1", 1, nil, o)
	wait(t, "worker-0", w0, 0)
	wait(t, "worker-1", w1, 0)
}

func TestJAXWorkerCannotReachCoordinator(t *testing.T) {
	addr := deadAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	env := map[string]string{envCoordinatorAddress: host, envCoordinatorPort: port, envNumProcesses: "2", envProcessID: "1"}
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"--peer-timeout=300ms"}, func(k string) string { return env[k] }, &stdout, &stderr); code != exitPeerTimeout {
		t.Fatalf("exit %d, want %d:\n%s%s", code, exitPeerTimeout, stdout.String(), stderr.String())
	}
	wantInLog(t, "worker-1", stdout.String(),
		"worker-1 step=0 jax process_id=1 num_processes=2 coordinator="+addr,
		"worker-1 step=0 giving up: worker-0 at "+addr+" did not answer for ",
		"connection refused; exiting 142 (retryable)\n")
}

func TestLoadJAXConfig(t *testing.T) {
	good := map[string]string{envCoordinatorAddress: "jax-worker-0.jax.ns.svc", envCoordinatorPort: "6666", envNumProcesses: "4", envProcessID: "2"}
	with := func(change map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := change[k]; ok {
				return v
			}
			return good[k]
		}
	}
	for _, tc := range []struct {
		change map[string]string
		want   JAXConfig
		addr   string
	}{
		{nil, JAXConfig{"jax-worker-0.jax.ns.svc", 6666, 4, 2}, "jax-worker-0.jax.ns.svc:6666"},
		{map[string]string{envCoordinatorAddress: " fd00::1 ", envProcessID: "0"}, JAXConfig{"fd00::1", 6666, 4, 0}, "[fd00::1]:6666"},
		{map[string]string{envCoordinatorAddress: "[fd00::1]"}, JAXConfig{"fd00::1", 6666, 4, 2}, "[fd00::1]:6666"},
	} {
		c, err := loadJAXConfig(with(tc.change))
		if err != nil || c != tc.want || c.Coordinator() != tc.addr {
			t.Errorf("%v: got %+v (%s) %v, want %+v (%s)", tc.change, c, c.Coordinator(), err, tc.want, tc.addr)
		}
	}
	if c, _ := loadJAXConfig(with(nil)); c.Name() != "worker-2" {
		t.Errorf("Name() = %s, want worker-2: process i is worker i", c.Name())
	}

	for _, tc := range []struct {
		change map[string]string
		want   string
	}{
		{map[string]string{envCoordinatorAddress: ""}, "COORDINATOR_ADDRESS is not set: the JAXJob operator sets it on every replica (e.g. COORDINATOR_ADDRESS=127.0.0.1 to run by hand)"},
		{map[string]string{envCoordinatorPort: " "}, "COORDINATOR_PORT is not set"},
		{map[string]string{envNumProcesses: ""}, "NUM_PROCESSES is not set"},
		{map[string]string{envProcessID: ""}, "PROCESS_ID is not set"},
		{map[string]string{envCoordinatorAddress: "jax-worker-0:6666"}, `COORDINATOR_ADDRESS="jax-worker-0:6666" has a port: it is the coordinator's host, and the port goes in COORDINATOR_PORT`},
		{map[string]string{envCoordinatorAddress: "http://jax-worker-0"}, `COORDINATOR_ADDRESS="http://jax-worker-0" is not a host name or IP address`},
		{map[string]string{envCoordinatorPort: "jax"}, `COORDINATOR_PORT="jax" is not an integer of at least 1`},
		{map[string]string{envCoordinatorPort: "70000"}, "COORDINATOR_PORT=70000 is not a port (1-65535)"},
		{map[string]string{envNumProcesses: "0"}, `NUM_PROCESSES="0" is not an integer of at least 1`},
		{map[string]string{envProcessID: "-1"}, `PROCESS_ID="-1" is not an integer of at least 0`},
		{map[string]string{envProcessID: "4"}, "PROCESS_ID=4 is not under NUM_PROCESSES=4: the coordinator is process 0 and the others 1 to 3"},
	} {
		if _, err := loadJAXConfig(with(tc.change)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.change, err, tc.want)
		}
	}
}

func TestJAXCLI(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	var stdout, stderr bytes.Buffer
	if code := cli(nil, env(map[string]string{envProcessID: "1", envNumProcesses: "2"}), &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "COORDINATOR_ADDRESS is not set") {
		t.Errorf("no COORDINATOR_ADDRESS: exit %d: %s", code, stderr.String())
	}
	// TF_CONFIG, then DMLC_ROLE, then the PyTorch variables win over the JAX ones.
	jax := map[string]string{envCoordinatorAddress: "c", envNumProcesses: "2"}
	for _, tc := range []struct {
		flag string
		env  map[string]string
		want bool
	}{
		{"", jax, true},
		{"", map[string]string{envProcessID: "0"}, true},
		{"", map[string]string{"PYTHONUNBUFFERED": "1"}, false},
		{"", map[string]string{}, false},
		{`{}`, jax, false},
		{"", map[string]string{envTFConfig: "{}", envCoordinatorAddress: "c"}, false},
		{"", map[string]string{envDMLCRole: "worker", envCoordinatorAddress: "c"}, false},
		{"", map[string]string{envMasterAddr: "m", envCoordinatorAddress: "c"}, false},
	} {
		if got := useJAX(tc.flag, env(tc.env)); got != tc.want {
			t.Errorf("useJAX(%q, %v) = %v, want %v", tc.flag, tc.env, got, tc.want)
		}
	}
	stdout.Reset()
	if code := cli([]string{"--help"}, env(nil), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "JAX mode") {
		t.Errorf("--help lacks JAX mode:\n%s", stdout.String())
	}
	// With nothing set, the error names every mode's variables.
	stderr.Reset()
	if code := cli(nil, env(nil), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "in a JAXJob COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID") {
		t.Errorf("nothing set: exit %d: %s", code, stderr.String())
	}
}
