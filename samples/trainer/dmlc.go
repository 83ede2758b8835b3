package main

// DMLC mode: the replicas of an MXJob. Only the scheduler's address is given (DMLC_PS_ROOT_URI
// and DMLC_PS_ROOT_PORT); servers and workers find each other through it (scheduler.go), then
// speak the same parameter-server protocol as a TfJob's replicas (ps.go).

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

const (
	// heartbeatEvery is how often a server registers again: a recreated scheduler, which starts
	// with an empty registry, learns the servers within it.
	heartbeatEvery = 5 * time.Second
	// finishedTimeout bounds a done worker's telling the scheduler: it exits 0 either way.
	finishedTimeout = 10 * time.Second
)

// RunDMLC runs one replica of an MXJob until it is done and returns its exit code. The context
// ending is SIGTERM: a server then exits 0, the scheduler and a worker 143.
func RunDMLC(ctx context.Context, cfg DMLCConfig, o Options) int {
	index := 0
	if cfg.Role != roleScheduler {
		index = hostIndex(o.Hostname, cfg.Role, cfg.count(cfg.Role))
	}
	podIP := cfg.PodIP
	if podIP == "" {
		podIP = "(unset: servers register the address the scheduler sees)"
	}
	log, ok := begin(&o, replicaName(cfg.Role, index), "dmlc role=%s scheduler=%s servers=%d workers=%d hostname=%s pod_ip=%s",
		cfg.Role, cfg.Root(), cfg.NumServer, cfg.NumWorker, o.Hostname, podIP)
	if !ok {
		return exitUsage
	}
	switch cfg.Role {
	case roleScheduler:
		return runScheduler(ctx, cfg, o, log)
	case roleServer:
		return runServer(ctx, cfg, o, log, index)
	}
	return runWorker(ctx, cfg, o, log, index)
}

// schedulerClient is a server's or a worker's line to the scheduler.
type schedulerClient struct {
	peerClient
	cfg       DMLCConfig
	scheduler peer
	id        string
}

func newSchedulerClient(cfg DMLCConfig, o Options, log *logger) *schedulerClient {
	return &schedulerClient{
		peerClient: newPeerClient(o.PeerTimeout, log), cfg: cfg,
		scheduler: peer{replicaName(roleScheduler, 0), cfg.Root()}, id: rand.Text(),
	}
}

func (c *schedulerClient) registration(role string, index, port int) registerRequest {
	return registerRequest{ID: c.id, Role: role, Index: index, Host: c.cfg.PodIP, Port: port,
		NumServer: c.cfg.NumServer, NumWorker: c.cfg.NumWorker}
}

// register registers this replica, retrying until the scheduler answers, and gets its index.
func (c *schedulerClient) register(ctx context.Context, role string, index, port int) (registerResponse, error) {
	var resp registerResponse
	err := c.call(ctx, c.scheduler, http.MethodPost, "/v1/register", c.registration(role, index, port), &resp)
	return resp, err
}

// heartbeat registers again every heartbeatEvery until ctx ends, saying only when that starts
// or stops failing.
func (c *schedulerClient) heartbeat(ctx context.Context, role string, index, port int) {
	failing := false
	for sleep(ctx, heartbeatEvery) {
		var resp registerResponse
		err := c.once(ctx, c.scheduler, http.MethodPost, "/v1/register", c.registration(role, index, port), &resp)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			c.log.printf("cannot register again with %s (every %s, going on serving): %v", c.scheduler.name, heartbeatEvery, err)
		case err == nil && failing:
			c.log.printf("registered again with %s", c.scheduler.name)
		}
		failing = err != nil
	}
}

// servers waits until the training starts and returns the servers by shard.
func (c *schedulerClient) servers(ctx context.Context) ([]peer, error) {
	var resp serversResponse
	if err := c.call(ctx, c.scheduler, http.MethodGet, "/v1/servers", nil, &resp); err != nil {
		return nil, err
	}
	if len(resp.Servers) != c.cfg.NumServer {
		return nil, &rejectedError{c.scheduler, http.StatusOK, fmt.Sprintf("%d servers, not %s=%d", len(resp.Servers), envDMLCNumServer, c.cfg.NumServer)}
	}
	shards := make([]peer, len(resp.Servers))
	for i, s := range resp.Servers {
		if s.Index != i {
			return nil, &rejectedError{c.scheduler, http.StatusOK, fmt.Sprintf("server %d where server %d belongs", s.Index, i)}
		}
		shards[i] = peer{replicaName(roleServer, i), s.Addr}
	}
	return shards, nil
}

// finished tells the scheduler that worker index is done.
func (c *schedulerClient) finished(ctx context.Context, index int) error {
	ctx, cancel := context.WithTimeout(ctx, finishedTimeout)
	defer cancel()
	var resp clusterResponse
	return c.call(ctx, c.scheduler, http.MethodPost, "/v1/finished", finishedRequest{c.id, index}, &resp)
}

// runServer registers with the scheduler, then serves the shard it is given until SIGTERM
// (exit 0), like a TfJob's ps.
func runServer(ctx context.Context, cfg DMLCConfig, o Options, log *logger, index int) int {
	ln, err := listen(o.Listener, net.JoinHostPort("", strconv.Itoa(o.Port)))
	if err != nil {
		log.printf("cannot listen on --port %d: %v; exiting %d", o.Port, err, exitFailed)
		return exitFailed
	}
	port := ln.Addr().(*net.TCPAddr).Port
	sched := newSchedulerClient(cfg, o, log)
	a, err := sched.register(ctx, roleServer, index, port)
	if err != nil {
		ln.Close()
		if ctx.Err() != nil {
			log.printf("stopping: %v", context.Cause(ctx))
			return exitOK
		}
		return failure(ctx, log, err)
	}
	log.setName(replicaName(roleServer, a.Index))
	log.printf("registered with %s: shard %d of %d, workers reach it at %s", sched.scheduler.name, a.Index, a.NumServer, a.Addr)
	s, err := serveParams(ln, "", a.Index, a.NumServer, o, log)
	if err != nil { // cannot happen: ln is open
		log.printf("cannot serve: %v; exiting %d", err, exitFailed)
		return exitFailed
	}
	beat, stopBeat := context.WithCancel(ctx)
	defer stopBeat()
	go sched.heartbeat(beat, roleServer, a.Index, port)
	return s.serveUntilStopped(ctx, log)
}

// runWorker registers with the scheduler, gets the servers from it, and trains like a TfJob's
// worker until done; then it tells the scheduler and exits 0.
func runWorker(ctx context.Context, cfg DMLCConfig, o Options, log *logger, index int) int {
	sched := newSchedulerClient(cfg, o, log)
	a, err := sched.register(ctx, roleWorker, index, 0)
	if err != nil {
		return failure(ctx, log, err)
	}
	name := replicaName(roleWorker, a.Index)
	log.setName(name)
	shards, err := sched.servers(ctx)
	if err != nil {
		return failure(ctx, log, err)
	}
	if cfg.NumServer == 0 {
		shards = []peer{sched.scheduler} // it holds the parameters itself
	}
	log.printf("registered with %s as worker %d of %d; parameters on %s", sched.scheduler.name, a.Index, a.NumWorker, peerList(shards))
	code := train(ctx, newPSClient(shards, name, o.PeerTimeout, log), name, o, log, nil)
	if code == exitOK {
		if err := sched.finished(ctx, a.Index); err != nil {
			log.printf("could not tell %s that this worker finished (it decides without): %v", sched.scheduler.name, err)
		}
	}
	return code
}
