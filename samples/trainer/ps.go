package main

// A parameter server holds one shard of the model, parameter i on shard i % shards, and applies
// plain SGD to it with its own --learning-rate. It speaks JSON over HTTP on the port of its
// TF_CONFIG address:
//
//	GET  /v1/params?replica=R&shard=I&shards=N  -> {"shard","shards","indices","values","step","done","reason"}
//	POST /v1/apply  {"replica","shard","shards","grads"}  -> {"step","done","reason"}
//	POST /v1/done   {"replica","reason"}                  -> {"step","done","reason"}
//	GET  /v1/status                                       -> {"step","done","reason"}
//
// step counts the gradients this shard has applied; shard 0's count is the global step, as
// TensorFlow keeps global_step on the first parameter server. done is set once by the decider
// and never cleared: every trainer that sees it stops. Answers 4xx mean a retry cannot help
// (409: the replicas disagree about the cluster; 422: the training diverged); the client treats
// them as permanent and everything else (refused, DNS, 5xx) as "not up yet".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

type paramsResponse struct {
	Shard   int       `json:"shard"`
	Shards  int       `json:"shards"`
	Indices []int     `json:"indices"`
	Values  []float64 `json:"values"`
	statusResponse
}

type applyRequest struct {
	Replica string    `json:"replica"`
	Shard   int       `json:"shard"`
	Shards  int       `json:"shards"`
	Grads   []float64 `json:"grads"` // one per index of the shard, in order
}

type doneRequest struct {
	Replica string `json:"replica"`
	Reason  string `json:"reason"`
}

type statusResponse struct {
	Step   int64  `json:"step"`
	Done   bool   `json:"done"`
	Reason string `json:"reason,omitempty"`
}

type errorResponse struct {
	Error string `json:"error"`
}

// paramServer is one shard's state.
type paramServer struct {
	shard, shards int
	lr            float64
	log           *logger
	logEvery      int64
	fault         fault
	exit          chan int // an --exit-at-step code, once

	mu      sync.Mutex
	indices []int
	values  []float64
	step    int64
	done    bool
	reason  string
	seen    map[string]bool // replicas that have called, to log each one's first call
	sawDone map[string]bool // replicas that were told done
}

func newParamServer(shard, shards int, o Options, log *logger) *paramServer {
	s := &paramServer{
		shard: shard, shards: shards, lr: o.LearningRate, log: log, logEvery: o.LogEvery,
		fault: o.fault(), exit: make(chan int, 1),
		seen: map[string]bool{}, sawDone: map[string]bool{},
	}
	// Zeros: the loss then starts at Σw² + b² + noise ≈ 10, far from any threshold.
	for i := shard; i < NumParams; i += shards {
		s.indices = append(s.indices, i)
		s.values = append(s.values, 0)
	}
	return s
}

func (s *paramServer) handler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	return mux
}

// routes adds the protocol to mux; a DMLC scheduler that holds the parameters serves them
// beside its registry.
func (s *paramServer) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/params", s.getParams)
	mux.HandleFunc("POST /v1/apply", s.apply)
	mux.HandleFunc("POST /v1/done", s.setDone)
	mux.HandleFunc("GET /v1/status", s.getStatus)
}

// checkShard refuses a caller whose TF_CONFIG lays the model out differently.
func (s *paramServer) checkShard(shard, shards int) error {
	if shard != s.shard || shards != s.shards {
		return fmt.Errorf("this is shard %d of %d, the caller expects shard %d of %d: the replicas' TF_CONFIGs disagree about the ps list",
			s.shard, s.shards, shard, shards)
	}
	return nil
}

// met records a call from replica; the lock is held.
func (s *paramServer) met(replica string) {
	if replica != "" && !s.seen[replica] {
		s.seen[replica] = true
		s.log.printf("first call from %s", replica)
	}
	if s.done {
		s.sawDone[replica] = true
	}
}

func (s *paramServer) statusLocked() statusResponse {
	return statusResponse{Step: s.step, Done: s.done, Reason: s.reason}
}

func (s *paramServer) getParams(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	shard, err1 := strconv.Atoi(q.Get("shard"))
	shards, err2 := strconv.Atoi(q.Get("shards"))
	if err := errors.Join(err1, err2); err != nil {
		reply(w, http.StatusBadRequest, errorResponse{"shard and shards must be integers: " + err.Error()})
		return
	}
	if err := s.checkShard(shard, shards); err != nil {
		reply(w, http.StatusConflict, errorResponse{err.Error()})
		return
	}
	s.mu.Lock()
	s.met(q.Get("replica"))
	resp := paramsResponse{Shard: s.shard, Shards: s.shards, Indices: s.indices,
		Values: append([]float64(nil), s.values...), statusResponse: s.statusLocked()}
	s.mu.Unlock()
	reply(w, http.StatusOK, resp)
}

func (s *paramServer) apply(w http.ResponseWriter, r *http.Request) {
	var req applyRequest
	if err := decodeBody(r, &req); err != nil {
		reply(w, http.StatusBadRequest, errorResponse{err.Error()})
		return
	}
	if err := s.checkShard(req.Shard, req.Shards); err != nil {
		reply(w, http.StatusConflict, errorResponse{err.Error()})
		return
	}
	if len(req.Grads) != len(s.indices) {
		reply(w, http.StatusBadRequest, errorResponse{fmt.Sprintf("%d gradients for %d parameters", len(req.Grads), len(s.indices))})
		return
	}
	s.mu.Lock()
	s.met(req.Replica)
	next := make([]float64, len(s.values))
	for j, g := range req.Grads {
		next[j] = s.values[j] - s.lr*g
		if !finite(next[j]) {
			s.mu.Unlock()
			reply(w, http.StatusUnprocessableEntity, errorResponse{fmt.Sprintf(
				"the gradient from %s makes parameter %d %v: the training diverged; lower --learning-rate", req.Replica, s.indices[j], next[j])})
			return
		}
	}
	s.values = next
	s.step++
	step, resp := s.step, s.statusLocked()
	s.mu.Unlock()

	s.log.setStep(step)
	if s.logEvery > 0 && step%s.logEvery == 0 {
		s.log.printf("applied %d gradients, last from %s", step, req.Replica)
	}
	if code, exit := s.fault.check(step, s.log); exit {
		select {
		case s.exit <- code:
		default:
		}
	}
	reply(w, http.StatusOK, resp)
}

func (s *paramServer) setDone(w http.ResponseWriter, r *http.Request) {
	var req doneRequest
	if err := decodeBody(r, &req); err != nil {
		reply(w, http.StatusBadRequest, errorResponse{err.Error()})
		return
	}
	s.mu.Lock()
	first := !s.done
	if first {
		s.done, s.reason = true, req.Reason
	}
	s.met(req.Replica)
	resp := s.statusLocked()
	s.mu.Unlock()
	if first {
		s.log.printf("done, set by %s: %s", req.Replica, req.Reason)
	}
	reply(w, http.StatusOK, resp)
}

func (s *paramServer) getStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	resp := s.statusLocked()
	s.mu.Unlock()
	reply(w, http.StatusOK, resp)
}

// waitSawDone waits until every replica in names has been told done, or for at most max. A
// decider that holds the parameters itself lingers this way, so that the workers learn the
// training is over before the parameters go away with it.
func (s *paramServer) waitSawDone(ctx context.Context, names []string, max time.Duration) {
	waitUntil(ctx, max, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, n := range names {
			if !s.sawDone[n] {
				return false
			}
		}
		return true
	})
}

// waitUntil polls cond until it holds, for at most max or until ctx ends; it reports whether
// cond held.
func waitUntil(ctx context.Context, max time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(max)
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 || !sleep(ctx, min(20*time.Millisecond, left)) {
			return cond()
		}
	}
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// listen returns ln when it is set (tests), else a listener for the replica address addr.
func listen(ln net.Listener, addr string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	la, err := listenAddr(addr)
	if err != nil {
		return nil, err
	}
	return net.Listen("tcp", la)
}

// httpServer is a replica's running HTTP server.
type httpServer struct {
	srv    *http.Server
	failed chan error
}

func serveHTTP(ln net.Listener, h http.Handler) *httpServer {
	s := &httpServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, failed: make(chan error, 1)}
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.failed <- err
		}
	}()
	return s
}

// stop closes the server, letting calls in flight finish for a moment.
func (s *httpServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}

// serving is a running parameter server.
type serving struct {
	ps *paramServer
	*httpServer
}

// serveParams starts serving shard on ln, or on a listener for addr when ln is nil.
func serveParams(ln net.Listener, addr string, shard, shards int, o Options, log *logger) (*serving, error) {
	ln, err := listen(ln, addr)
	if err != nil {
		return nil, err
	}
	ps := newParamServer(shard, shards, o, log)
	log.printf("serving parameters %v (shard %d of %d) on %s, learning rate %g", ps.indices, shard, shards, ln.Addr(), o.LearningRate)
	return &serving{ps, serveHTTP(ln, ps.handler())}, nil
}

// runPS serves this replica's shard until the context ends (SIGTERM: exit 0, the way a parameter
// server's job ends) or --exit-at-step fires. It never ends on its own: the operator stops it.
func runPS(ctx context.Context, cfg TFConfig, o Options, log *logger) int {
	s, err := serveParams(o.Listener, cfg.Self(), cfg.Task.Index, len(cfg.Cluster[typePS]), o, log)
	if err != nil {
		log.printf("cannot serve on %s: %v", cfg.Self(), err)
		return exitFailed
	}
	return s.serveUntilStopped(ctx, log)
}

// serveUntilStopped is a parameter server's life once it serves: until SIGTERM (exit 0),
// --exit-at-step, or the server failing.
func (s *serving) serveUntilStopped(ctx context.Context, log *logger) int {
	defer s.stop()
	select {
	case <-ctx.Done():
		log.printf("stopping: %v", context.Cause(ctx))
		return exitOK
	case code := <-s.ps.exit:
		return code
	case err := <-s.failed:
		log.printf("serving failed: %v", err)
		return exitFailed
	}
}
