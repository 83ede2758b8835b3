package main

// The DMLC scheduler is the one replica of an MXJob whose address everyone knows
// (DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT), as in MXNet's ps-lite. It serves a registry, JSON over
// HTTP:
//
//	POST /v1/register {"id","role","index","host","port","num_server","num_worker"} -> {"index","num_server","num_worker","addr"}
//	GET  /v1/servers                                -> {"servers":[{"index","addr"}]}, 503 until the training starts
//	POST /v1/finished {"id","index"}                -> the /v1/cluster answer
//	GET  /v1/cluster                                -> who registered and finished, for people with curl
//
// A server registers the port it serves on and its address: POD_IP when the pod has it, else the
// address the scheduler sees the call come from; its index is its shard. A worker registers to
// get its index, then asks for the servers, which it gets once the training starts: every
// server has registered and the scheduler has evaluated the starting parameters (the first
// point of the loss curve). index is the one the replica asks for (its pod's
// hostname says it, or it had it before: servers register again every few seconds, so that a
// recreated scheduler learns them again), or -1: the lowest free one, in registration order.
//
// The scheduler is also the decider: it reads the parameters from the servers, evaluates, sets
// done on them, and once every worker has said it finished, exits. With DMLC_NUM_SERVER=0 it
// holds the parameters itself, serving the ps protocol (ps.go) beside the registry.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

const (
	// serversLongPoll is how long GET /v1/servers waits for the last servers before answering
	// 503, so that workers get the list as soon as it is complete without asking in a loop.
	serversLongPoll = 2 * time.Second
	// stepPollMax is the longest the scheduler waits to look at the global step again (or
	// --eval-interval when shorter), so that it evaluates close to every --eval-every steps.
	stepPollMax = 100 * time.Millisecond
	// workersFinishMax bounds how long a scheduler that has decided waits for the workers to say
	// they finished; it serves the parameters meanwhile when it holds them.
	workersFinishMax = 30 * time.Second
)

type registerRequest struct {
	ID        string `json:"id"`             // the process: registering again gets the same index
	Role      string `json:"role"`           // server or worker
	Index     int    `json:"index"`          // the index asked for; -1: any
	Host      string `json:"host,omitempty"` // a server's POD_IP; empty: the address the call comes from
	Port      int    `json:"port,omitempty"` // the port a server serves on
	NumServer int    `json:"num_server"`
	NumWorker int    `json:"num_worker"`
}

type registerResponse struct {
	Index     int    `json:"index"`
	NumServer int    `json:"num_server"`
	NumWorker int    `json:"num_worker"`
	Addr      string `json:"addr,omitempty"` // a server's address, as workers are given it
}

type serverEntry struct {
	Index int    `json:"index"`
	Addr  string `json:"addr"`
}

type serversResponse struct {
	Servers []serverEntry `json:"servers"`
}

type finishedRequest struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
}

type clusterResponse struct {
	NumServer         int      `json:"num_server"`
	NumWorker         int      `json:"num_worker"`
	Servers           []string `json:"servers"` // by shard; "" until registered
	WorkersRegistered int      `json:"workers_registered"`
	WorkersFinished   int      `json:"workers_finished"`
}

// slot is an index of a role; id is empty while nobody holds it.
type slot struct{ id, addr string }

type registry struct {
	cfg      DMLCConfig
	log      *logger
	longPoll time.Duration

	mu       sync.Mutex
	slots    map[string][]slot // by role
	started  bool              // the workers may have the servers and train
	finished []bool            // by worker index
}

func newRegistry(cfg DMLCConfig, log *logger) *registry {
	return &registry{cfg: cfg, log: log, longPoll: serversLongPoll, finished: make([]bool, cfg.NumWorker), slots: map[string][]slot{
		roleServer: make([]slot, cfg.NumServer),
		roleWorker: make([]slot, cfg.NumWorker),
	}}
}

func (g *registry) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/register", g.register)
	mux.HandleFunc("GET /v1/servers", g.servers)
	mux.HandleFunc("POST /v1/finished", g.setFinished)
	mux.HandleFunc("GET /v1/cluster", g.cluster)
}

func (g *registry) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := decodeBody(r, &req); err != nil {
		reply(w, http.StatusBadRequest, errorResponse{err.Error()})
		return
	}
	slots, ok := g.slots[req.Role]
	switch {
	case !ok:
		reply(w, http.StatusBadRequest, errorResponse{fmt.Sprintf("role %q registers with nobody: it is server or worker", req.Role)})
		return
	case req.NumServer != g.cfg.NumServer || req.NumWorker != g.cfg.NumWorker:
		reply(w, http.StatusConflict, errorResponse{fmt.Sprintf(
			"the scheduler has %s=%d and %s=%d, this %s %d and %d: the replicas disagree about the job",
			envDMLCNumServer, g.cfg.NumServer, envDMLCNumWorker, g.cfg.NumWorker, req.Role, req.NumServer, req.NumWorker)})
		return
	case req.Index < -1 || req.Index >= len(slots):
		reply(w, http.StatusConflict, errorResponse{fmt.Sprintf("%s index %d is not under %d", req.Role, req.Index, len(slots))})
		return
	}
	var addr string
	if req.Role == roleServer {
		if req.Port < 1 || req.Port > 65535 {
			reply(w, http.StatusBadRequest, errorResponse{fmt.Sprintf("port %d is not a port", req.Port)})
			return
		}
		host := req.Host
		if host == "" {
			host, _, _ = net.SplitHostPort(r.RemoteAddr)
		}
		addr = net.JoinHostPort(host, strconv.Itoa(req.Port))
	}

	g.mu.Lock()
	i := assign(slots, req.ID, req.Index)
	if i < 0 {
		g.mu.Unlock()
		reply(w, http.StatusConflict, errorResponse{fmt.Sprintf("all %d %ss have registered already", len(slots), req.Role)})
		return
	}
	prev := slots[i]
	slots[i] = slot{req.ID, addr}
	held := 0
	for _, s := range slots {
		if s.id != "" {
			held++
		}
	}
	g.mu.Unlock()

	name, at := replicaName(req.Role, i), ""
	if addr != "" {
		at = " at " + addr
	}
	switch {
	case prev.id == "":
		g.log.printf("%s registered%s (%d of %d %ss)", name, at, held, len(slots), req.Role)
	case prev.id != req.ID:
		g.log.printf("%s registered again%s, a new process (it was at %q)", name, at, prev.addr)
	case prev.addr != addr:
		g.log.printf("%s moved to %s from %s", name, addr, prev.addr)
	}
	reply(w, http.StatusOK, registerResponse{Index: i, NumServer: g.cfg.NumServer, NumWorker: g.cfg.NumWorker, Addr: addr})
}

// assign picks the index for id: the one it asks for, the one it holds already, else the lowest
// free one; -1 when none is free.
func assign(slots []slot, id string, want int) int {
	if want >= 0 {
		return want
	}
	free := -1
	for i, s := range slots {
		if s.id == id {
			return i
		}
		if s.id == "" && free < 0 {
			free = i
		}
	}
	return free
}

// serverList is every server's address by shard, and whether all have registered.
func (g *registry) serverList() ([]serverEntry, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var list []serverEntry
	for i, s := range g.slots[roleServer] {
		if s.id != "" {
			list = append(list, serverEntry{i, s.addr})
		}
	}
	return list, len(list) == g.cfg.NumServer
}

func (g *registry) serversRegistered() bool {
	_, all := g.serverList()
	return all
}

// start lets the workers have the servers.
func (g *registry) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.started = true
}

func (g *registry) hasStarted() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started
}

func (g *registry) servers(w http.ResponseWriter, r *http.Request) {
	waitUntil(r.Context(), g.longPoll, g.hasStarted)
	list, all := g.serverList()
	switch {
	case !all:
		reply(w, http.StatusServiceUnavailable, errorResponse{fmt.Sprintf("%d of %d servers have registered", len(list), g.cfg.NumServer)})
	case !g.hasStarted():
		reply(w, http.StatusServiceUnavailable, errorResponse{"the scheduler is evaluating the starting parameters"})
	default:
		reply(w, http.StatusOK, serversResponse{list})
	}
}

func (g *registry) setFinished(w http.ResponseWriter, r *http.Request) {
	var req finishedRequest
	if err := decodeBody(r, &req); err != nil {
		reply(w, http.StatusBadRequest, errorResponse{err.Error()})
		return
	}
	if req.Index < 0 || req.Index >= len(g.finished) {
		reply(w, http.StatusConflict, errorResponse{fmt.Sprintf("worker index %d is not under %d", req.Index, len(g.finished))})
		return
	}
	g.mu.Lock()
	first := !g.finished[req.Index]
	g.finished[req.Index] = true
	resp := g.clusterLocked()
	g.mu.Unlock()
	if first {
		g.log.printf("%s finished (%d of %d workers)", replicaName(roleWorker, req.Index), resp.WorkersFinished, resp.NumWorker)
	}
	reply(w, http.StatusOK, resp)
}

func (g *registry) clusterLocked() clusterResponse {
	c := clusterResponse{NumServer: g.cfg.NumServer, NumWorker: g.cfg.NumWorker, Servers: []string{}}
	for _, s := range g.slots[roleServer] {
		c.Servers = append(c.Servers, s.addr)
	}
	for i, s := range g.slots[roleWorker] {
		if s.id != "" {
			c.WorkersRegistered++
		}
		if g.finished[i] {
			c.WorkersFinished++
		}
	}
	return c
}

func (g *registry) cluster(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	resp := g.clusterLocked()
	g.mu.Unlock()
	reply(w, http.StatusOK, resp)
}

func (g *registry) workersFinished() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.clusterLocked().WorkersFinished
}

// waitServers waits until every server has registered, logging now and then, for at most
// timeout; it reports whether they did.
func (g *registry) waitServers(ctx context.Context, timeout time.Duration) bool {
	return waitLogged(ctx, timeout, g.serversRegistered, func(waited time.Duration) {
		list, _ := g.serverList()
		g.log.printf("still waiting for the servers, %s so far: %d of %d have registered", waited.Round(time.Second), len(list), g.cfg.NumServer)
	})
}

// waitLogged is waitUntil for at most timeout, calling still with the time waited so far every
// waitLogEvery that cond does not hold yet.
func waitLogged(ctx context.Context, timeout time.Duration, cond func() bool, still func(waited time.Duration)) bool {
	start := time.Now()
	for {
		left := timeout - time.Since(start)
		if waitUntil(ctx, max(min(waitLogEvery, left), 0), cond) {
			return true
		}
		if ctx.Err() != nil || time.Since(start) >= timeout {
			return false
		}
		still(time.Since(start))
	}
}

// runScheduler serves the registry, waits for the servers, decides when the training is over,
// and exits once the workers have finished.
func runScheduler(ctx context.Context, cfg DMLCConfig, o Options, log *logger) int {
	ln, err := listen(o.Listener, cfg.Root())
	if err != nil {
		log.printf("cannot serve the registry on %s: %v; exiting %d", cfg.Root(), err, exitFailed)
		return exitFailed
	}
	reg := newRegistry(cfg, log)
	mux := http.NewServeMux()
	reg.routes(mux)
	var shards []peer
	if cfg.NumServer == 0 {
		ps := newParamServer(0, 1, o.withoutFault(), log)
		ps.routes(mux)
		// The scheduler reads them over HTTP, as it would from servers.
		shards = []peer{{replicaName(roleScheduler, 0), selfAddr(ln)}}
		log.printf("%s=0: holding parameters %v myself, learning rate %g", envDMLCNumServer, ps.indices, o.LearningRate)
	}
	srv := serveHTTP(ln, mux)
	defer srv.stop()
	log.printf("serving the registry on %s; waiting for %d server(s) and %d worker(s)", ln.Addr(), cfg.NumServer, cfg.NumWorker)

	if cfg.NumServer > 0 {
		if !reg.waitServers(ctx, o.PeerTimeout) {
			if ctx.Err() != nil {
				return failure(ctx, log, context.Cause(ctx))
			}
			list, _ := reg.serverList()
			log.printf("giving up: %d of %d servers registered within --peer-timeout %s; exiting %d (retryable)",
				len(list), cfg.NumServer, o.PeerTimeout, exitPeerTimeout)
			return exitPeerTimeout
		}
		list, _ := reg.serverList()
		for _, s := range list {
			shards = append(shards, peer{replicaName(roleServer, s.Index), s.Addr})
		}
		log.printf("all %d servers have registered: %s", len(shards), peerList(shards))
	}

	client := newPSClient(shards, replicaName(roleScheduler, 0), o.PeerTimeout, log)
	d, err := newDecider(o, log, client, nil, nil)
	if err != nil {
		log.printf("cannot write TensorBoard events to --logdir %s: %v; exiting %d", o.LogDir, err, exitFailed)
		return exitFailed
	}
	defer d.close()
	code, decided := watch(ctx, client, d, reg, o, log)
	if !decided {
		return code
	}
	log.printf("waiting up to %s for the %d worker(s) to finish", workersFinishMax, cfg.NumWorker)
	if waitUntil(ctx, workersFinishMax, func() bool { return reg.workersFinished() == cfg.NumWorker }) {
		log.printf("all %d worker(s) finished; exiting %d", cfg.NumWorker, code)
	} else {
		log.printf("%d of %d worker(s) said they finished; exiting %d all the same: the decision stands",
			reg.workersFinished(), cfg.NumWorker, code)
	}
	return code
}

// watch looks at the global step every stepPollMax (or --eval-interval) and lets d decide every --eval-every
// steps; decided is false when it stopped for another reason (code then says which). The
// training starts after the first evaluation: the starting loss is the first point of the
// curve, and a scheduler recreated after the training ended finds done there.
func watch(ctx context.Context, client *psClient, d *decider, reg *registry, o Options, log *logger) (code int, decided bool) {
	fault := o.fault()
	evals := int64(0)
	for {
		params, st, err := client.params(ctx)
		if err != nil {
			return failure(ctx, log, err), false
		}
		log.setStep(st.Step)
		d.reportProgress(st.Step, false) // the workers train: the scheduler watches their step
		if st.Done || d.due(st.Step) {
			if code, over := d.decide(ctx, params, st); over {
				return code, true
			}
			reg.start()
			evals++
			if code, exit := fault.check(evals, log); exit {
				return code, false
			}
		}
		if !sleep(ctx, min(o.EvalInterval, stepPollMax)) {
			return failure(ctx, log, context.Cause(ctx)), false
		}
	}
}

// selfAddr is where this process reaches ln: loopback when ln listens on every interface.
func selfAddr(ln net.Listener) string {
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !a.IP.IsUnspecified() {
		return ln.Addr().String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
}
