package main

// Data-parallel training by a coordinator, the PyTorch mode's (a PyTorchJob: pytorchconfig.go)
// and the JAX mode's (a JAXJob: jaxconfig.go). Every replica is a rank, told rank 0's address,
// the number of ranks and its own rank, under its framework's names (a world). Training is
// parameter averaging: every rank takes --sync-every SGD steps on its own data, then sends its
// parameters to rank 0, which averages them and sends the average back to every rank (an
// allreduce by rank 0), round after round, until rank 0's evaluation says done. JSON over HTTP
// on rank 0's port:
//
//	POST /v1/join      {"id","rank","world_size"}                    -> the round
//	POST /v1/allreduce {"id","rank","world_size","round","params"}   -> the round after, once every rank sent this one
//	GET  /v1/status                                                  -> the round, for people with curl
//
// where the round is {"round","step","params","ranks","done","reason"}: the parameters every rank
// starts the round from. A rank that sends a round other than rank 0's (it restarted, or rank 0
// did) gets rank 0's round at once and goes on from there. An allreduce waits up to
// allreduceLongPoll for the other ranks, then answers 503, and the rank asks again: the same
// retries with backoff as every call to a peer (psclient.go), up to --peer-timeout. In a world
// with a barrier (JAX's) a join waits the same way until every rank has joined, and rank 0
// trains only then.

import (
	"context"
	"crypto/rand"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// allreduceLongPoll is how long POST /v1/allreduce waits for the other ranks before answering
// 503; a round that ends meanwhile answers at once.
const allreduceLongPoll = 5 * time.Second

type joinRequest struct {
	ID        string `json:"id"` // the process, to tell a recreated pod in rank 0's log
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
}

type allreduceRequest struct {
	joinRequest
	Round  int64     `json:"round"`
	Params []float64 `json:"params"`
}

// roundResponse is rank 0's round: the parameters every rank starts it from.
type roundResponse struct {
	Round  int64     `json:"round"`
	Step   int64     `json:"step"` // round × --sync-every: the SGD steps every rank has taken
	Params []float64 `json:"params"`
	Ranks  int       `json:"ranks"` // how many ranks the parameters are the average of
	Done   bool      `json:"done"`
	Reason string    `json:"reason,omitempty"`
}

// world is a rank's view of the training, whichever framework's variables told it.
type world struct {
	size, rank int
	addr       string // rank 0's host:port
	// sizeVar and portVar are the variables that told the size and rank 0's port, for messages.
	sizeVar, portVar string
	// rank0 is what the framework calls rank 0: "the master".
	rank0 string
	// name is how logs name a rank, as the operator names its pod: master-0, worker-2.
	name func(rank int) string
	// barrier: a join waits until every rank has joined, and rank 0 trains only then.
	barrier bool
}

// runRank runs one rank until it is done and returns its exit code. The context ending is
// SIGTERM: exit 143.
func runRank(ctx context.Context, w world, o Options, log *logger) int {
	if w.rank == 0 {
		return runRank0(ctx, w, o, log)
	}
	return runOtherRank(ctx, w, o, log)
}

// averager is rank 0's side of the allreduce: this round's parameters by rank, and the round
// every rank starts from.
type averager struct {
	w         world
	syncEvery int64
	log       *logger
	longPoll  time.Duration
	joined    chan struct{} // closed once every rank has joined

	mu      sync.Mutex
	round   int64
	params  []float64
	ranks   int
	done    bool
	reason  string
	parts   [][]float64   // this round's parameters by rank; nil until the rank sends them
	next    chan struct{} // closed when the round ends
	closed  chan struct{} // closed when rank 0 stops
	ids     []string      // the process behind each rank, to log who joins
	sawDone []bool        // the ranks that were told done
}

func newAverager(w world, syncEvery int64, log *logger) *averager {
	a := &averager{
		w: w, syncEvery: syncEvery, log: log, longPoll: allreduceLongPoll, joined: make(chan struct{}),
		params: make([]float64, NumParams), parts: make([][]float64, w.size),
		next: make(chan struct{}), closed: make(chan struct{}),
		ids: make([]string, w.size), sawDone: make([]bool, w.size),
	}
	a.ids[0] = "rank 0" // itself
	if w.size == 1 {
		close(a.joined)
	}
	return a
}

func (a *averager) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/join", a.join)
	mux.HandleFunc("POST /v1/allreduce", a.allreduce)
	mux.HandleFunc("GET /v1/status", a.status)
}

func (a *averager) roundLocked() roundResponse {
	return roundResponse{Round: a.round, Step: a.round * a.syncEvery, Params: a.params, Ranks: a.ranks, Done: a.done, Reason: a.reason}
}

// check refuses a rank whose environment disagrees with rank 0's.
func (a *averager) check(req joinRequest) error {
	switch {
	case req.WorldSize != a.w.size:
		return fmt.Errorf("%s has %s=%d, rank %d has %d: the replicas disagree about the job", a.w.rank0, a.w.sizeVar, a.w.size, req.Rank, req.WorldSize)
	case req.Rank < 1 || req.Rank >= a.w.size:
		return fmt.Errorf("rank %d is not another rank's: %s is rank 0, the others 1 to %d", req.Rank, a.w.rank0, a.w.size-1)
	}
	return nil
}

// met records a call from req's process; the lock is held.
func (a *averager) met(req joinRequest) {
	prev := a.ids[req.Rank]
	if prev == req.ID {
		return
	}
	a.ids[req.Rank] = req.ID
	if prev != "" {
		a.log.printf("%s (rank %d) joined again, a new process", a.w.name(req.Rank), req.Rank)
		return
	}
	joined := 0
	for _, id := range a.ids {
		if id != "" {
			joined++
		}
	}
	a.log.printf("%s (rank %d) joined (%d of %d ranks)", a.w.name(req.Rank), req.Rank, joined, a.w.size)
	if joined == a.w.size {
		close(a.joined)
	}
}

// answer replies with the round, noting that rank was told when it is done (0: rank 0 itself,
// or somebody with curl).
func (a *averager) answer(w http.ResponseWriter, rank int) {
	a.mu.Lock()
	resp := a.roundLocked()
	if a.done && rank > 0 {
		a.sawDone[rank] = true
	}
	a.mu.Unlock()
	reply(w, http.StatusOK, resp)
}

// decode reads the body into req and checks who sent it; it is false once it has answered an
// error.
func (a *averager) decode(w http.ResponseWriter, r *http.Request, req any, who *joinRequest) bool {
	if err := decodeBody(r, req); err != nil {
		reply(w, http.StatusBadRequest, errorResponse{err.Error()})
		return false
	}
	if err := a.check(*who); err != nil {
		reply(w, http.StatusConflict, errorResponse{err.Error()})
		return false
	}
	return true
}

func (a *averager) join(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if !a.decode(w, r, &req, &req) {
		return
	}
	a.mu.Lock()
	a.met(req)
	a.mu.Unlock()
	if a.w.barrier && !a.await(w, r, a.joined, a.notJoined) {
		return
	}
	a.answer(w, req.Rank)
}

// await waits up to longPoll for done to close; it is false once it has answered 503, saying
// what the rank waits for (why), or the rank has gone.
func (a *averager) await(w http.ResponseWriter, r *http.Request, done <-chan struct{}, why func() string) bool {
	t := time.NewTimer(a.longPoll)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		reply(w, http.StatusServiceUnavailable, errorResponse{why()})
	case <-a.closed:
		reply(w, http.StatusServiceUnavailable, errorResponse{a.w.rank0 + " is stopping"})
	case <-r.Context().Done():
	}
	return false
}

func (a *averager) allreduce(w http.ResponseWriter, r *http.Request) {
	var req allreduceRequest
	if !a.decode(w, r, &req, &req.joinRequest) {
		return
	}
	if len(req.Params) != NumParams {
		reply(w, http.StatusBadRequest, errorResponse{fmt.Sprintf("%d parameters, not %d", len(req.Params), NumParams)})
		return
	}
	a.mu.Lock()
	a.met(req.joinRequest)
	var ended chan struct{}
	if !a.done && req.Round == a.round {
		// Another round (the rank or rank 0 restarted) gets rank 0's at once.
		a.parts[req.Rank] = req.Params
		ended = a.next
	}
	a.mu.Unlock()
	if ended != nil && !a.await(w, r, ended, a.waitingFor) {
		return
	}
	a.answer(w, req.Rank)
}

func (a *averager) status(w http.ResponseWriter, r *http.Request) { a.answer(w, 0) }

// waitingFor says whose parameters this round lacks.
func (a *averager) waitingFor() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("round %d waits for %s", a.round, a.missing(func(rank int) bool { return a.parts[rank] == nil }))
}

// notJoined says which ranks have not joined.
func (a *averager) notJoined() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return "waiting for " + a.missing(func(rank int) bool { return a.ids[rank] == "" }) + " to join"
}

// missing names the ranks that lack something; the lock is held.
func (a *averager) missing(lacks func(rank int) bool) string {
	var missing []string
	for rank := range a.w.size {
		if lacks(rank) {
			missing = append(missing, fmt.Sprintf("%s (rank %d)", a.w.name(rank), rank))
		}
	}
	return strings.Join(missing, ", ")
}

// waitJoined waits until every rank has joined, for at most timeout.
func (a *averager) waitJoined(ctx context.Context, timeout time.Duration) bool {
	joined := func() bool {
		select {
		case <-a.joined:
			return true
		default:
			return false
		}
	}
	return waitLogged(ctx, timeout, joined, func(waited time.Duration) {
		a.log.printf("still waiting, %s so far (gives up after --peer-timeout %s): %s", waited.Round(time.Second), timeout, a.notJoined())
	})
}

func (a *averager) complete() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !slices.ContainsFunc(a.parts, func(p []float64) bool { return p == nil })
}

// gather adds rank 0's own parameters to this round and waits until every rank has sent its, for
// at most timeout; it returns their average, or nil.
func (a *averager) gather(ctx context.Context, own []float64, timeout time.Duration) []float64 {
	a.mu.Lock()
	a.parts[0] = own
	a.mu.Unlock()
	if !waitLogged(ctx, timeout, a.complete, func(waited time.Duration) {
		a.log.printf("still waiting, %s so far (gives up after --peer-timeout %s): %s", waited.Round(time.Second), timeout, a.waitingFor())
	}) {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	avg := make([]float64, NumParams)
	for _, p := range a.parts {
		for j := range avg {
			avg[j] += p[j] / float64(a.w.size)
		}
	}
	return avg
}

// publish ends the round: params are what every rank starts the next one from; a reason ends
// the training.
func (a *averager) publish(params []float64, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.ContainsFunc(params, func(x float64) bool { return !finite(x) }) {
		a.params, a.ranks = params, a.w.size // JSON has no NaN: a diverged average is not sent
	}
	a.round++
	if reason != "" {
		a.done, a.reason = true, reason
	}
	a.parts = make([][]float64, a.w.size)
	close(a.next)
	a.next = make(chan struct{})
}

// waitSawDone waits until every worker has been told done, for at most max.
func (a *averager) waitSawDone(ctx context.Context, max time.Duration) {
	told := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		n := 0
		for _, saw := range a.sawDone[1:] {
			if saw {
				n++
			}
		}
		return n
	}
	if !waitUntil(ctx, max, func() bool { return told() == a.w.size-1 }) {
		a.log.printf("%d of %d worker(s) heard that the training is done; the operator stops the others", told(), a.w.size-1)
	}
}

func (a *averager) close() { close(a.closed) }

// rankTrainer is a rank's local SGD, on its own data.
type rankTrainer struct {
	o     Options
	log   *logger
	rng   *mathrand.Rand
	fault fault
	local int64   // this process's steps, for --exit-at-step
	loss  float64 // the last batch's
	// onStep, when set (rank 0's), hears of every step: the step every rank is at, and the loss.
	onStep func(step int64, loss float64)
}

func newRankTrainer(name string, o Options, log *logger) *rankTrainer {
	return &rankTrainer{o: o, log: log, rng: newRand(dataSeed(name)), fault: o.fault()}
}

// steps takes --sync-every SGD steps on params, in place, from round's first step; stop says
// the replica must exit with code.
func (t *rankTrainer) steps(ctx context.Context, params []float64, round int64) (code int, stop bool) {
	for i := range t.o.SyncEvery {
		t.local++
		loss, grad := Gradient(params, Synthetic(t.rng, t.o.BatchSize))
		if !finite(loss) {
			t.log.printf("the training diverged (batch loss %v): lower --learning-rate; exiting %d", loss, exitFailed)
			return exitFailed, true
		}
		for j, g := range grad {
			params[j] -= t.o.LearningRate * g
		}
		t.loss = loss
		t.log.setStep(round*t.o.SyncEvery + i + 1)
		if t.onStep != nil {
			t.onStep(round*t.o.SyncEvery+i+1, loss)
		}
		if code, exit := t.fault.check(t.local, t.log); exit {
			return code, true
		}
		if t.o.StepDelay > 0 && !sleep(ctx, t.o.StepDelay) {
			return failure(ctx, t.log, context.Cause(ctx)), true
		}
	}
	return 0, false
}

// averaged logs the end of a round, at the first and then every --log-every steps.
func (t *rankTrainer) averaged(st roundResponse) {
	t.log.setStep(st.Step)
	if st.Round == 1 || st.Step/t.o.LogEvery != (st.Step-t.o.SyncEvery)/t.o.LogEvery {
		t.log.printf("averaged with %d ranks: round=%d local_step=%d loss=%.4f", st.Ranks, st.Round, t.local, t.loss)
	}
}

// runRank0 serves the allreduce on rank 0's port, trains like every rank, averages, evaluates
// every --eval-every steps and ends the training.
func runRank0(ctx context.Context, w world, o Options, log *logger) int {
	ln, err := listen(o.Listener, w.addr)
	if err != nil {
		log.printf("cannot listen on %s (%s): %v; exiting %d", w.addr, w.portVar, err, exitFailed)
		return exitFailed
	}
	a := newAverager(w, o.SyncEvery, log)
	mux := http.NewServeMux()
	a.routes(mux)
	srv := serveHTTP(ln, mux)
	defer srv.stop()
	defer a.close() // first: answers the ranks still waiting
	log.printf("serving the allreduce on %s for %d worker(s); averaging every %d steps", ln.Addr(), w.size-1, o.SyncEvery)
	if w.barrier {
		if !a.waitJoined(ctx, o.PeerTimeout) {
			if ctx.Err() != nil {
				return failure(ctx, log, context.Cause(ctx))
			}
			log.printf("giving up: %s within --peer-timeout %s; exiting %d (retryable)", a.notJoined(), o.PeerTimeout, exitPeerTimeout)
			return exitPeerTimeout
		}
		log.printf("all %d ranks have joined", w.size)
	}

	d, err := newDecider(o, log, nil, nil, nil)
	if err != nil {
		log.printf("cannot write TensorBoard events to --logdir %s: %v; exiting %d", o.LogDir, err, exitFailed)
		return exitFailed
	}
	defer d.close()
	latest := make([]float64, NumParams) // the last average, which d.end sends with done
	params := slices.Clone(latest)
	d.end = func(ctx context.Context, reason string) {
		a.publish(latest, reason)
		a.waitSawDone(ctx, lingerMax)
	}
	// The starting loss is the first point on the TensorBoard plot.
	if code, over := d.decide(ctx, params, psStatus{}); over {
		return code
	}
	t := newRankTrainer(w.name(0), o, log)
	t.onStep = d.trained
	for round := int64(0); ; round++ {
		if code, stop := t.steps(ctx, params, round); stop {
			return code
		}
		if latest = a.gather(ctx, params, o.PeerTimeout); latest == nil {
			if ctx.Err() != nil {
				return failure(ctx, log, context.Cause(ctx))
			}
			log.printf("giving up: %s within --peer-timeout %s; exiting %d (retryable)", a.waitingFor(), o.PeerTimeout, exitPeerTimeout)
			return exitPeerTimeout
		}
		st := roundResponse{Round: round + 1, Step: (round + 1) * o.SyncEvery, Ranks: w.size}
		t.averaged(st)
		if d.due(st.Step) {
			if code, over := d.decide(ctx, latest, psStatus{Step: st.Step}); over {
				return code
			}
		}
		a.publish(latest, "")
		params = slices.Clone(latest)
	}
}

// rank0Client is another rank's line to rank 0.
type rank0Client struct {
	peerClient
	rank0 peer
	me    joinRequest
}

func (c *rank0Client) call(ctx context.Context, path string, in any) (roundResponse, error) {
	var resp roundResponse
	if err := c.peerClient.call(ctx, c.rank0, http.MethodPost, path, in, &resp); err != nil {
		return resp, err
	}
	if len(resp.Params) != NumParams {
		return resp, &rejectedError{c.rank0, http.StatusOK, fmt.Sprintf("%d parameters, not %d", len(resp.Params), NumParams)}
	}
	return resp, nil
}

// runOtherRank joins rank 0, retrying until it is up (and, with a barrier, until every rank
// has joined), then trains round after round, sending its parameters to rank 0 and going on
// from the average, until done.
func runOtherRank(ctx context.Context, w world, o Options, log *logger) int {
	c := &rank0Client{newPeerClient(o.PeerTimeout, log), peer{w.name(0), w.addr},
		joinRequest{ID: rand.Text(), Rank: w.rank, WorldSize: w.size}}
	st, err := c.call(ctx, "/v1/join", c.me)
	if err != nil {
		return failure(ctx, log, err)
	}
	log.setStep(st.Step)
	log.printf("joined %s at %s as rank %d of %d, at round %d", c.rank0.name, c.rank0.addr, w.rank, w.size, st.Round)
	t := newRankTrainer(w.name(w.rank), o, log)
	for !st.Done {
		round, params := st.Round, st.Params
		if code, stop := t.steps(ctx, params, round); stop {
			return code
		}
		if st, err = c.call(ctx, "/v1/allreduce", allreduceRequest{c.me, round, params}); err != nil {
			return failure(ctx, log, err)
		}
		switch {
		case st.Done:
		case st.Round != round+1:
			log.setStep(st.Step)
			log.printf("%s is at round %d, not %d (it restarted, or this worker did): going on from its parameters", c.rank0.name, st.Round, round+1)
		default:
			t.averaged(st)
		}
	}
	log.setStep(st.Step)
	log.printf("done, set by the decider (%s): exiting 0", st.Reason)
	return exitOK
}
