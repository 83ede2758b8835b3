// Command trainer is mlkube's sample distributed trainer: a linear regression trained with
// asynchronous SGD across the replicas of a TfJob (the addresses in TF_CONFIG) or of an MXJob
// (MXNet's DMLC_* variables and a scheduler), parameter servers and all, or with synchronous
// parameter averaging across the ranks of a PyTorchJob (MASTER_ADDR, WORLD_SIZE, RANK) or the
// processes of a JAXJob (COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID), over plain HTTP. It exists to exercise the operator for real: replicas that find each other, a
// decider whose exit 0 ends the job, exit codes that mean what the operator's restart policy
// reads them to mean, and TensorBoard event files. `trainer --help` explains it all.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Exit codes, as the operator's ExitCode restart policy reads them: 0 done, 1-127 permanent,
// 128-255 retryable.
const (
	exitOK     = 0
	exitFailed = 1 // did not converge, diverged, or a peer refused: no retry can fix it
	exitUsage  = 2 // bad flags, TF_CONFIG or DMLC_*
	// exitPeerTimeout is 128+SIGALRM, "a timer ran out": a peer not up in time is no bug in
	// this program, and a new pod may well find it.
	exitPeerTimeout = 142
	// exitInterrupted is 128+SIGTERM: a trainer stopped before its work was done (an evicted or
	// deleted pod) must be recreated, not taken as finished.
	exitInterrupted = 143
)

const usageText = `trainer: mlkube's sample distributed trainer.

It trains a linear regression (8 features and a bias, mean squared error) with asynchronous SGD
across the replicas of a TfJob, using only the addresses in TF_CONFIG (or --tf-config). What a
replica does depends on its task type:

  ps         holds shard i % N of the parameters and applies the gradients it is sent (SGD with
             --learning-rate). It never exits on its own, like TensorFlow's parameter servers:
             the operator stops it (SIGTERM: exit 0).
  worker     loops: fetch the parameters from every ps, compute the gradient on a synthetic
             batch of --batch-size, push it; exits 0 once the ps say done.
  master, chief (or worker 0 when the cluster has neither): the decider. Trains like a
             worker, evaluates on a held-out set every --eval-every global steps, and once the
             loss is under --loss-threshold sets done on the ps and exits 0.
  evaluator  evaluates every --eval-interval; exits 0 once done.

With no ps in the cluster, the decider holds the parameters itself, so a job of one replica
trains too. Replicas talk JSON over HTTP on the port of their TF_CONFIG address (GET /v1/params,
POST /v1/apply, POST /v1/done, GET /v1/status) and retry with backoff while a peer is not up.

DMLC mode (an MXJob): without TF_CONFIG, DMLC_ROLE picks the role and DMLC_PS_ROOT_URI,
DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER and DMLC_NUM_WORKER say where the scheduler is and how many
servers and workers to expect, as MXNet's ps-lite reads them. Only the scheduler's address is
known; everyone registers with it:

  scheduler  serves the registry on DMLC_PS_ROOT_PORT, gives each server its shard and each
             worker the servers' addresses, and decides: it evaluates every --eval-every global
             steps (looking at the step every 100ms, or --eval-interval when shorter), sets done
             on the servers under --loss-threshold, waits for the workers to finish and exits 0.
             With DMLC_NUM_SERVER=0 it holds the parameters itself.
  server     a ps: listens on --port, registers its address (POD_IP when set, else the address
             the scheduler sees it call from) and serves the shard it is given until SIGTERM.
  worker     gets the servers from the scheduler, trains like a TfJob worker, exits 0 once done.

A replica's index is the trailing -N of its hostname when that is <job>-<role>-N (an MXJob pod),
else the order in which it registered; until the scheduler answers it logs as server-? or
worker-?.

PyTorch mode (a PyTorchJob): without TF_CONFIG and DMLC_ROLE, MASTER_ADDR, MASTER_PORT,
WORLD_SIZE and RANK (or torchrun's PET_MASTER_ADDR, PET_MASTER_PORT, PET_NNODES and
PET_NODE_RANK; the plain ones win) say where the master is, how many ranks there are and which
one this is. Training is data-parallel with parameter averaging: every rank takes --sync-every
SGD steps on its own data, sends its parameters to the master, and goes on from their average.

  master     rank 0: serves the allreduce on MASTER_PORT, trains like a worker, averages, and
             decides: it evaluates every --eval-every steps and, under --loss-threshold, tells
             the workers done and exits 0. It gives up (142) when a rank does not send its
             parameters within --peer-timeout.
  worker     rank i+1 is worker-i, as the pods are named: joins the master (retrying while it is
             not up), trains, exits 0 once done.

JAX mode (a JAXJob): without TF_CONFIG, DMLC_ROLE and the PyTorch variables, COORDINATOR_ADDRESS,
COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID say where the coordinator is, how many processes
there are and which one this is, as a JAX program passes them to jax.distributed.initialize
(coordinator_address COORDINATOR_ADDRESS:COORDINATOR_PORT, num_processes, process_id). Every
process is a worker, named worker-PROCESS_ID as the pods are; every process registers with the
coordinator and waits until all NUM_PROCESSES have, as initialize does, then trains as in
PyTorch mode:

  worker 0   process 0, the coordinator: serves the coordination and the allreduce on
             COORDINATOR_PORT and decides, as a PyTorch master. It gives up (142) when a process
             does not register, or send its parameters, within --peer-timeout.
  worker i   process i: registers (retrying while the coordinator is not up, and while others
             have not registered), trains, exits 0 once done.

Exit codes (0 done; 1-127 fail the job; 128-255 make the operator recreate the pod):
  0    this replica is done
  1    the loss is not under --loss-threshold after --max-steps, the training diverged, or a
       peer refused a request (the replicas disagree about the cluster)
  2    bad flags, TF_CONFIG, DMLC_*, PyTorch or JAX variables
  142  a peer did not answer for --peer-timeout (128+SIGALRM); for the scheduler: the servers
       did not all register within --peer-timeout; for a PyTorch master or JAX coordinator: a
       rank did not register or send its parameters within it
  143  a worker, decider, scheduler, evaluator, PyTorch master or JAX process stopped by SIGTERM
       or SIGINT before done (128+SIGTERM)
  N    --exit-code N at --exit-at-step, to exercise restarts

Every log line starts with the replica and the global step: "worker-1 step=42 ...".

Progress: where the operator serves progress reports, it sets MLKUBE_PROGRESS_URL,
MLKUBE_PROGRESS_TOKEN_FILE and MLKUBE_PROGRESS_CA_FILE, and the decider (master, chief or worker
0, the DMLC scheduler, PyTorch rank 0, JAX process 0) POSTs the global step to it, of
--max-steps, with the batch and eval losses: at most once a second, and always when it decides. A
report that fails is logged (once for each kind of error) and changes nothing else.

Run by hand, one replica per shell (or each with & at the end):
  C='"cluster":{"ps":["127.0.0.1:2230"],"worker":["127.0.0.1:2231","127.0.0.1:2232"]}'
  trainer --tf-config "{$C,\"task\":{\"type\":\"ps\",\"index\":0}}"
  trainer --tf-config "{$C,\"task\":{\"type\":\"worker\",\"index\":1}}"
  trainer --tf-config "{$C,\"task\":{\"type\":\"worker\",\"index\":0}}" --logdir /tmp/tb
or in DMLC mode:
  export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=9091 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1
  DMLC_ROLE=server trainer --port 9092
  DMLC_ROLE=worker trainer
  DMLC_ROLE=scheduler trainer --logdir /tmp/tb
or in PyTorch mode:
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=23456 WORLD_SIZE=2
  RANK=1 trainer
  RANK=0 trainer --logdir /tmp/tb
or in JAX mode:
  export COORDINATOR_ADDRESS=127.0.0.1 COORDINATOR_PORT=6666 NUM_PROCESSES=2
  PROCESS_ID=1 trainer
  PROCESS_ID=0 trainer --logdir /tmp/tb

Flags:
`

// Options are the flags, plus what main and tests provide.
type Options struct {
	LogDir        string
	LossThreshold float64
	MaxSteps      int64
	LearningRate  float64
	BatchSize     int
	EvalEvery     int64
	EvalInterval  time.Duration
	LogEvery      int64
	PeerTimeout   time.Duration
	StepDelay     time.Duration
	ExitCode      int
	ExitAtStep    int64
	ExitOnceFile  string
	Port          int   // DMLC mode: where a server listens
	SyncEvery     int64 // PyTorch and JAX modes: SGD steps between averagings

	Out      io.Writer    // the log; io.Discard when nil
	Hostname string       // names the event file
	Listener net.Listener // when set, a replica that serves (parameters, the DMLC registry, the PyTorch master, the JAX coordinator) serves on it (tests)
	// Progress, when set, is where the decider reports the training's progress to the operator
	// (MLKUBE_PROGRESS_URL and the rest: progress.go).
	Progress *progressReporter
}

func defaultOptions() Options {
	return Options{
		LossThreshold: 0.01,
		MaxSteps:      5000,
		LearningRate:  0.05,
		BatchSize:     32,
		EvalEvery:     10,
		EvalInterval:  time.Second,
		LogEvery:      10,
		PeerTimeout:   5 * time.Minute,
		ExitCode:      -1,
		Port:          defaultServerPort,
		SyncEvery:     5,
	}
}

func (o *Options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.LogDir, "logdir", o.LogDir, "write TensorBoard event files of the loss here (the decider or DMLC scheduler; the evaluator into `dir`/eval); empty: none")
	fs.Float64Var(&o.LossThreshold, "loss-threshold", o.LossThreshold, "the decider ends the training once the held-out loss is under this (the noise floor is 0.0025)")
	fs.Int64Var(&o.MaxSteps, "max-steps", o.MaxSteps, "the decider gives up (exit 1) when the global step reaches this without converging")
	fs.Float64Var(&o.LearningRate, "learning-rate", o.LearningRate, "SGD step size, applied by the parameter servers (in PyTorch and JAX modes by every rank; give every replica the same flags)")
	fs.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "synthetic examples per gradient")
	fs.Int64Var(&o.EvalEvery, "eval-every", o.EvalEvery, "the decider evaluates every this many global steps")
	fs.DurationVar(&o.EvalInterval, "eval-interval", o.EvalInterval, "the evaluator evaluates this often (the DMLC scheduler looks at the global step this often, at most every 100ms)")
	fs.Int64Var(&o.LogEvery, "log-every", o.LogEvery, "log every this many steps of a trainer (gradients applied, on a ps)")
	fs.DurationVar(&o.PeerTimeout, "peer-timeout", o.PeerTimeout, "how long a peer may not answer before giving up with exit 142 (retryable)")
	fs.DurationVar(&o.StepDelay, "step-delay", o.StepDelay, "pause after each training step, so a job runs long enough to watch (e.g. 200ms)")
	fs.IntVar(&o.ExitCode, "exit-code", o.ExitCode, "with --exit-at-step: exit with this `code` (0-255; e.g. 137 to look preempted, 1 to fail the job; -1: none)")
	fs.Int64Var(&o.ExitAtStep, "exit-at-step", o.ExitAtStep, "exit with --exit-code when this replica reaches this `step` of its own (a trainer's steps, a ps's or server's gradients applied, an evaluator's or scheduler's evaluations), counted from the process start: a recreated pod fails again, unless --exit-once-file")
	fs.StringVar(&o.ExitOnceFile, "exit-once-file", o.ExitOnceFile, "with --exit-at-step: exit only if `path` does not exist yet, creating it first; on a volume that outlives the pod (hostPath, a PersistentVolumeClaim; not an emptyDir, which goes with the pod) the replica fails once, then trains")
	fs.IntVar(&o.Port, "port", o.Port, "DMLC mode: the `port` a server listens on and registers with the scheduler (an MXJob replica's default port; 0: any free port)")
	fs.Int64Var(&o.SyncEvery, "sync-every", o.SyncEvery, "PyTorch and JAX modes: the SGD `steps` every rank takes on its own data before rank 0 (the master, the coordinator) averages the parameters")
}

func (o Options) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.LossThreshold > 0, "--loss-threshold must be positive")
	check(o.MaxSteps >= 1, "--max-steps must be at least 1")
	check(o.LearningRate > 0 && finite(o.LearningRate), "--learning-rate must be positive")
	check(o.BatchSize >= 1, "--batch-size must be at least 1")
	check(o.EvalEvery >= 1, "--eval-every must be at least 1")
	check(o.EvalInterval > 0, "--eval-interval must be positive")
	check(o.LogEvery >= 1, "--log-every must be at least 1")
	check(o.PeerTimeout > 0, "--peer-timeout must be positive")
	check(o.StepDelay >= 0, "--step-delay must not be negative")
	check(o.ExitCode >= -1 && o.ExitCode <= 255, "--exit-code must be 0-255")
	check(o.ExitAtStep >= 0, "--exit-at-step must not be negative")
	check((o.ExitCode >= 0) == (o.ExitAtStep > 0), "--exit-code and --exit-at-step go together")
	check(o.ExitOnceFile == "" || o.ExitAtStep > 0, "--exit-once-file needs --exit-at-step")
	check(o.Port >= 0 && o.Port <= 65535, "--port must be 0-65535")
	check(o.SyncEvery >= 1, "--sync-every must be at least 1")
	return errors.Join(errs...)
}

// fault is --exit-code at --exit-at-step: a failure on purpose, to exercise the operator.
type fault struct {
	code     int
	atStep   int64
	onceFile string
}

func (o Options) fault() fault { return fault{o.ExitCode, o.ExitAtStep, o.ExitOnceFile} }

// withoutFault are the options for parameters a replica serves beside its own work (a decider or
// a DMLC scheduler with no ps): --exit-at-step counts the replica's own steps, and a second check
// in the same process would use up --exit-once-file without the process exiting.
func (o Options) withoutFault() Options {
	o.ExitAtStep, o.ExitOnceFile = 0, ""
	return o
}

// check tells whether the replica must exit now, at its own step, and with what code.
func (f fault) check(step int64, log *logger) (int, bool) {
	if f.atStep <= 0 || step != f.atStep {
		return 0, false
	}
	if f.onceFile != "" {
		file, err := os.OpenFile(f.onceFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		switch {
		case errors.Is(err, fs.ErrExist):
			log.printf("--exit-once-file %s exists: this replica failed on purpose before; going on", f.onceFile)
			return 0, false
		case err != nil:
			// Failing on every run would loop through the restarts; say so once, plainly.
			log.printf("cannot create --exit-once-file: %v; exiting %d", err, exitFailed)
			return exitFailed, true
		}
		file.Close()
	}
	log.printf("exiting with code %d at own step %d (--exit-code, --exit-at-step)", f.code, step)
	return f.code, true
}

// logger writes one line per call: the replica, the step, then the message.
type logger struct {
	mu   sync.Mutex
	w    io.Writer
	name string // changes once, when a DMLC replica learns its index
	step atomic.Int64
}

func newLogger(w io.Writer, name string) *logger { return &logger{w: w, name: name} }

func (l *logger) setStep(step int64) { l.step.Store(step) }

func (l *logger) setName(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.name = name
}

func (l *logger) printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s step=%d %s\n", l.name, l.step.Load(), msg)
}

// begin fills in what o leaves out and starts the log of replica name with the line that says
// what it is; it is false, the reason logged, when the flags are bad.
func begin(o *Options, name, format string, args ...any) (*logger, bool) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Hostname == "" {
		o.Hostname = "localhost"
	}
	log := newLogger(o.Out, name)
	log.printf(format, args...)
	if err := o.validate(); err != nil {
		log.printf("bad flags: %v; exiting %d", err, exitUsage)
		return log, false
	}
	return log, true
}

// Run runs one replica of a TfJob until it is done and returns its exit code. The context
// ending is SIGTERM: a ps then exits 0, any other replica 143.
func Run(ctx context.Context, cfg TFConfig, o Options) int {
	cluster, _ := json.Marshal(cfg.Cluster)
	log, ok := begin(&o, cfg.Name(), "cluster=%s task=%s:%d role=%s parameters_on=%s",
		cluster, cfg.Task.Type, cfg.Task.Index, cfg.role(), peerList(cfg.ParamServers()))
	if !ok {
		return exitUsage
	}
	switch cfg.Task.Type {
	case typePS:
		return runPS(ctx, cfg, o, log)
	case typeEvaluator:
		return runEvaluator(ctx, cfg, o, log)
	}
	return runTrainer(ctx, cfg, o, log)
}

// cli is main, testable: it parses args and TF_CONFIG (or, without it, the DMLC_* variables, or
// else the PyTorch ones, or else the JAX ones) and runs the replica until a signal.
func cli(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o := defaultOptions()
	fs := flag.NewFlagSet("trainer", flag.ContinueOnError)
	var flagOut bytes.Buffer
	fs.SetOutput(&flagOut)
	tfConfig := fs.String("tf-config", "", "TF_CONFIG as `JSON`, instead of the TF_CONFIG variable (local runs, tests)")
	o.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			stdout.Write(flagOut.Bytes())
			return exitOK
		}
		stderr.Write(flagOut.Bytes())
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "trainer: unexpected arguments %q; see trainer --help\n", fs.Args())
		return exitUsage
	}
	o.Out = stdout
	o.Hostname, _ = os.Hostname()
	o.Progress = progressFromEnv(getenv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch {
	case useDMLC(*tfConfig, getenv):
		return runMode(ctx, o, stderr, func() (DMLCConfig, error) { return loadDMLCConfig(getenv) }, RunDMLC)
	case usePyTorch(*tfConfig, getenv):
		return runMode(ctx, o, stderr, func() (PyTorchConfig, error) { return loadPyTorchConfig(getenv) }, RunPyTorch)
	case useJAX(*tfConfig, getenv):
		return runMode(ctx, o, stderr, func() (JAXConfig, error) { return loadJAXConfig(getenv) }, RunJAX)
	}
	return runMode(ctx, o, stderr, func() (TFConfig, error) { return loadTFConfig(*tfConfig, getenv) }, Run)
}

// runMode loads a mode's configuration and runs the replica; a bad configuration is exit 2.
func runMode[C any](ctx context.Context, o Options, stderr io.Writer, load func() (C, error), run func(context.Context, C, Options) int) int {
	cfg, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return exitUsage
	}
	return run(ctx, cfg, o)
}

func main() {
	os.Exit(cli(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
