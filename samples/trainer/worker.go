package main

// Trainers (workers and the decider) run asynchronous SGD against the parameter servers: fetch
// the model, compute the gradient on a fresh synthetic batch, push it, repeat, until a shard
// says done. The decider (master, chief, or worker 0 when there is neither, the same replica
// whose exit 0 the operator reads as the job's success) also evaluates on the held-out set and
// is the one that sets done. The evaluator only evaluates. In DMLC mode the decider is the
// scheduler, which does not train (scheduler.go); its workers train with the same loop.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// lingerMax bounds how long a decider that holds the parameters itself waits, once done, for
// the workers to hear it.
const lingerMax = 5 * time.Second

// runTrainer is a worker, or the decider when cfg says so.
func runTrainer(ctx context.Context, cfg TFConfig, o Options, log *logger) int {
	var hosted *serving
	if cfg.HostsParams() {
		var err error
		if hosted, err = serveParams(o.Listener, cfg.Self(), 0, 1, o.withoutFault(), log); err != nil {
			log.printf("cannot serve the parameters on %s: %v", cfg.Self(), err)
			return exitFailed
		}
		defer hosted.stop()
	}
	client := newPSClient(cfg.ParamServers(), cfg.Name(), o.PeerTimeout, log)

	var d *decider
	if cfg.IsDecider() {
		var others []string
		for _, n := range cfg.trainers() {
			if n != cfg.Name() {
				others = append(others, n)
			}
		}
		var err error
		if d, err = newDecider(o, log, client, hosted, others); err != nil {
			log.printf("cannot write TensorBoard events to --logdir %s: %v", o.LogDir, err)
			return exitFailed
		}
		defer d.close()
		// A first evaluation puts the starting loss on the TensorBoard plot, and lets a decider
		// that restarts after the training ended finish at once.
		if code, over := d.check(ctx); over {
			return code
		}
	}
	return train(ctx, client, cfg.Name(), o, log, d)
}

// train is a trainer's loop, until done; d is nil but on a decider that trains.
func train(ctx context.Context, client *psClient, name string, o Options, log *logger, d *decider) int {
	rng := newRand(dataSeed(name))
	fault := o.fault()
	for local := int64(1); ; local++ {
		params, st, err := client.params(ctx)
		if err != nil {
			return failure(ctx, log, err)
		}
		log.setStep(st.Step)
		if st.Done {
			if d != nil {
				code, _ := d.check(ctx)
				return code
			}
			return trainerDone(log, st)
		}

		loss, grad := Gradient(params, Synthetic(rng, o.BatchSize))
		if !finite(loss) {
			log.printf("the training diverged (batch loss %v): lower --learning-rate; exiting %d", loss, exitFailed)
			return exitFailed
		}
		if st, err = client.push(ctx, grad); err != nil {
			return failure(ctx, log, err)
		}
		log.setStep(st.Step)
		if st.Done && d == nil {
			// The ps counts this trainer as told: a decider that holds the parameters may be gone
			// before it asks again.
			return trainerDone(log, st)
		}
		if d != nil {
			d.trained(st.Step, loss)
		}
		if local == 1 || local%o.LogEvery == 0 {
			log.printf("local_step=%d loss=%.4f", local, loss)
		}
		if code, exit := fault.check(local, log); exit {
			return code
		}
		if d != nil && d.due(st.Step) {
			if code, over := d.check(ctx); over {
				return code
			}
		}
		if o.StepDelay > 0 && !sleep(ctx, o.StepDelay) {
			return failure(ctx, log, context.Cause(ctx))
		}
	}
}

// trainerDone ends a trainer that the decider's done reached.
func trainerDone(log *logger, st psStatus) int {
	log.printf("done, set by the decider (%s): exiting 0", st.Reason)
	return exitOK
}

// failure logs why a replica stops on err and picks its exit code: a peer gone for too long is
// retryable, a refusal permanent, a signal retryable (the work was not done).
func failure(ctx context.Context, log *logger, err error) int {
	var unreachable *unreachableError
	switch {
	case ctx.Err() != nil:
		log.printf("stopping before done: %v; exiting %d", context.Cause(ctx), exitInterrupted)
		return exitInterrupted
	case errors.As(err, &unreachable):
		log.printf("giving up: %v; exiting %d (retryable)", err, exitPeerTimeout)
		return exitPeerTimeout
	}
	log.printf("%v; exiting %d", err, exitFailed)
	return exitFailed
}

// evaluation computes the held-out loss and records it in the log and the event file.
type evaluation struct {
	set    Batch
	events *EventWriter
	log    *logger
}

func newEvaluation(logdir, hostname string, log *logger) (*evaluation, error) {
	e := &evaluation{set: EvalSet(), log: log}
	if logdir != "" {
		w, err := NewEventWriter(logdir, hostname, time.Now())
		if err != nil {
			return nil, err
		}
		e.events = w
		log.printf("writing TensorBoard events to %s", w.Path())
	}
	return e, nil
}

func (e *evaluation) record(params []float64, step int64, extra string) float64 {
	loss := Loss(params, e.set)
	e.log.printf("eval_loss=%.4f%s", loss, extra)
	if e.events != nil {
		if err := e.events.Scalar(step, "loss", loss, time.Now()); err != nil {
			// The training matters more than its plot: go on without events.
			e.log.printf("cannot write the event file, going on without it: %v", err)
			e.events.Close()
			e.events = nil
		}
	}
	return loss
}

func (e *evaluation) close() {
	if e.events != nil {
		e.events.Close()
	}
}

// decider evaluates every --eval-every global steps and ends the training.
type decider struct {
	*evaluation
	o        Options
	log      *logger
	client   *psClient
	hosted   *serving // the parameters, when this decider holds them
	trainers []string // the other trainers, whom a hosting decider waits for
	// end, when set, tells the others that the training is over instead of the parameter
	// servers: a PyTorch master, which has none.
	end      func(ctx context.Context, reason string)
	lastEval int64
	// progress reports the global step to the operator, with these losses once known.
	progress            *progressReporter
	batchLoss, evalLoss float64
	trainedOnce         bool
}

// newDecider evaluates through client; when it holds the parameters (hosted), it lingers once
// done until trainers have heard it.
func newDecider(o Options, log *logger, client *psClient, hosted *serving, trainers []string) (*decider, error) {
	ev, err := newEvaluation(o.LogDir, o.Hostname, log)
	if err != nil {
		return nil, err
	}
	return &decider{evaluation: ev, o: o, log: log, client: client, hosted: hosted, trainers: trainers, lastEval: -1, progress: o.Progress}, nil
}

// trained is a step of the decider's own training: the global step it reached and its batch loss.
func (d *decider) trained(step int64, loss float64) {
	d.batchLoss, d.trainedOnce = loss, true
	d.reportProgress(step, false)
}

// reportProgress tells the operator the global step, of --max-steps, with the last batch loss
// and eval loss; final: the training is over, and the report goes whatever the throttle says.
func (d *decider) reportProgress(step int64, final bool) {
	if d.progress == nil {
		return
	}
	var metrics []metric
	if d.trainedOnce {
		metrics = append(metrics, metric{"loss", d.batchLoss})
	}
	if d.lastEval >= 0 {
		metrics = append(metrics, metric{"eval_loss", d.evalLoss})
	}
	// The decider stops at the first evaluation at or past --max-steps: the step may go a little
	// past it, and a report's step is never past its total.
	d.progress.report(d.log, step, max(d.o.MaxSteps, step), final, metrics...)
}

func (d *decider) due(step int64) bool {
	return d.lastEval < 0 || step-d.lastEval >= d.o.EvalEvery || step >= d.o.MaxSteps
}

// check evaluates the current parameters and decides: done (exit 0) when the loss is under the
// threshold, failed (exit 1) at --max-steps, or over when another run already set done.
func (d *decider) check(ctx context.Context) (code int, over bool) {
	params, st, err := d.client.params(ctx)
	if err != nil {
		return failure(ctx, d.log, err), true
	}
	return d.decide(ctx, params, st)
}

// decide is check on parameters already fetched; it reports the progress, the last time once
// over.
func (d *decider) decide(ctx context.Context, params []float64, st psStatus) (code int, over bool) {
	code, over = d.judge(ctx, params, st)
	d.reportProgress(st.Step, over)
	return code, over
}

// judge evaluates params and decides, as decide says.
func (d *decider) judge(ctx context.Context, params []float64, st psStatus) (code int, over bool) {
	d.log.setStep(st.Step)
	d.lastEval = st.Step
	threshold := d.o.LossThreshold
	loss := d.record(params, st.Step, fmt.Sprintf(" threshold=%g", threshold))
	d.evalLoss = loss
	switch {
	case st.Done && loss < threshold:
		d.log.printf("done already (%s): exiting 0", st.Reason)
		return exitOK, true
	case st.Done:
		d.log.printf("done already (%s) but eval loss %.4f is not under %g: exiting %d", st.Reason, loss, threshold, exitFailed)
		return exitFailed, true
	case !finite(loss):
		d.stop(ctx, fmt.Sprintf("diverged: eval loss %v at step %d", loss, st.Step))
		d.log.printf("the training diverged: lower --learning-rate; exiting %d", exitFailed)
		return exitFailed, true
	case loss < threshold:
		d.stop(ctx, fmt.Sprintf("converged: eval loss %.4f < %g at step %d", loss, threshold, st.Step))
		d.log.printf("converged: eval loss %.4f < %g; exiting 0", loss, threshold)
		return exitOK, true
	case st.Step >= d.o.MaxSteps:
		d.stop(ctx, fmt.Sprintf("not converged: eval loss %.4f >= %g at --max-steps %d", loss, threshold, d.o.MaxSteps))
		d.log.printf("did not converge: eval loss %.4f is not under --loss-threshold %g after --max-steps %d; exiting %d",
			loss, threshold, d.o.MaxSteps, exitFailed)
		return exitFailed, true
	}
	return 0, false
}

// stop sets done on every shard, so that the workers end, then, when this decider holds the
// parameters, lingers until they have heard it.
func (d *decider) stop(ctx context.Context, reason string) {
	if d.end != nil {
		d.end(ctx, reason)
		return
	}
	if err := d.client.setDone(ctx, reason); err != nil {
		// The decision stands; workers that did not hear it are stopped by the operator.
		d.log.printf("could not tell every parameter server that the training is done: %v", err)
	}
	if d.hosted != nil {
		d.hosted.ps.waitSawDone(ctx, d.trainers, lingerMax)
	}
}

// runEvaluator evaluates every --eval-interval while the global step moves, into
// <logdir>/eval (the layout TensorFlow's estimators use, so TensorBoard shows it as its own
// run beside the decider's), and exits 0 once done.
func runEvaluator(ctx context.Context, cfg TFConfig, o Options, log *logger) int {
	logdir := o.LogDir
	if logdir != "" {
		logdir = filepath.Join(logdir, "eval")
	}
	ev, err := newEvaluation(logdir, o.Hostname, log)
	if err != nil {
		log.printf("cannot write TensorBoard events to %s: %v", logdir, err)
		return exitFailed
	}
	defer ev.close()
	client := newPSClient(cfg.ParamServers(), cfg.Name(), o.PeerTimeout, log)
	fault := o.fault()
	last := int64(-1)
	for n := int64(1); ; n++ {
		params, st, err := client.params(ctx)
		if err != nil {
			return failure(ctx, log, err)
		}
		log.setStep(st.Step)
		if st.Step != last {
			ev.record(params, st.Step, "")
			last = st.Step
		}
		if st.Done {
			log.printf("done, set by the decider (%s): exiting 0", st.Reason)
			return exitOK
		}
		if code, exit := fault.check(n, log); exit {
			return code
		}
		if !sleep(ctx, o.EvalInterval) {
			return failure(ctx, log, context.Cause(ctx))
		}
	}
}
