package main

// The trainers' side of the parameter-server protocol (see ps.go), and the calls every replica
// makes to a peer (a ps, a DMLC scheduler). Pods start in any order and a service's DNS name
// can take seconds to resolve, so every call retries with backoff until it has failed for
// --peer-timeout; only then is the peer declared unreachable, which the replica turns into a
// retryable exit code. A 4xx answer is final at once.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"time"
)

const (
	backoffFirst = 100 * time.Millisecond
	backoffMax   = 5 * time.Second
	// waitLogEvery keeps a long wait for a peer visible without flooding the log.
	waitLogEvery = 10 * time.Second
)

// unreachableError is a peer that did not answer for the whole --peer-timeout.
type unreachableError struct {
	peer   peer
	waited time.Duration
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%s at %s did not answer for %s (--peer-timeout); last error: %v", e.peer.name, e.peer.addr, e.waited.Round(time.Millisecond), e.err)
}

// rejectedError is a 4xx answer: the peer is up and says no.
type rejectedError struct {
	peer   peer
	status int
	msg    string
}

func (e *rejectedError) Error() string {
	return fmt.Sprintf("%s at %s refused the request (HTTP %d): %s", e.peer.name, e.peer.addr, e.status, e.msg)
}

// peerClient makes calls to peers, retrying while they are not reachable.
type peerClient struct {
	timeout time.Duration
	http    *http.Client
	log     *logger
	// reached holds the peers whose address this replica has logged.
	reached *sync.Map
}

func newPeerClient(peerTimeout time.Duration, log *logger) peerClient {
	return peerClient{
		timeout: peerTimeout, log: log, reached: &sync.Map{},
		// Per attempt: a peer that accepts but never answers is retried like one that refuses.
		http: &http.Client{Timeout: 10 * time.Second},
	}
}

// psClient talks to every parameter-server shard.
type psClient struct {
	peerClient
	shards  []peer
	replica string
}

func newPSClient(shards []peer, replica string, peerTimeout time.Duration, log *logger) *psClient {
	return &psClient{peerClient: newPeerClient(peerTimeout, log), shards: shards, replica: replica}
}

// psStatus is what the shards together say: shard 0's step, and done if any shard says so.
type psStatus struct {
	Step   int64
	Done   bool
	Reason string
}

func (st *psStatus) merge(shard int, r statusResponse) {
	if shard == 0 {
		st.Step = r.Step
	}
	if r.Done && !st.Done {
		st.Done, st.Reason = true, r.Reason
	}
}

// params fetches the whole model from every shard.
func (c *psClient) params(ctx context.Context) ([]float64, psStatus, error) {
	params := make([]float64, NumParams)
	var st psStatus
	for i, p := range c.shards {
		q := url.Values{"replica": {c.replica}, "shard": {fmt.Sprint(i)}, "shards": {fmt.Sprint(len(c.shards))}}
		var r paramsResponse
		if err := c.call(ctx, p, http.MethodGet, "/v1/params?"+q.Encode(), nil, &r); err != nil {
			return nil, st, err
		}
		if len(r.Indices) != len(r.Values) {
			return nil, st, &rejectedError{p, http.StatusOK, "indices and values differ in length"}
		}
		for j, idx := range r.Indices {
			if idx < 0 || idx >= NumParams || idx%len(c.shards) != i {
				return nil, st, &rejectedError{p, http.StatusOK, fmt.Sprintf("parameter %d does not belong on shard %d", idx, i)}
			}
			params[idx] = r.Values[j]
		}
		st.merge(i, r.statusResponse)
	}
	return params, st, nil
}

// push sends each shard the gradients of its parameters.
func (c *psClient) push(ctx context.Context, grad []float64) (psStatus, error) {
	var st psStatus
	for i, p := range c.shards {
		req := applyRequest{Replica: c.replica, Shard: i, Shards: len(c.shards)}
		for idx := i; idx < NumParams; idx += len(c.shards) {
			req.Grads = append(req.Grads, grad[idx])
		}
		var r statusResponse
		if err := c.call(ctx, p, http.MethodPost, "/v1/apply", req, &r); err != nil {
			return st, err
		}
		st.merge(i, r)
	}
	return st, nil
}

// setDone tells every shard that the training is over. It tries them all even when one fails,
// so that as many trainers as possible learn it.
func (c *psClient) setDone(ctx context.Context, reason string) error {
	var errs []error
	for _, p := range c.shards {
		var r statusResponse
		errs = append(errs, c.call(ctx, p, http.MethodPost, "/v1/done", doneRequest{c.replica, reason}, &r))
	}
	return errors.Join(errs...)
}

// call does one request, retrying while the peer is not reachable.
func (c *peerClient) call(ctx context.Context, p peer, method, path string, in, out any) error {
	var waitingSince, lastLog time.Time
	backoff := backoffFirst
	for {
		err := c.once(ctx, p, method, path, in, out)
		var rejected *rejectedError
		switch {
		case err == nil:
			if !waitingSince.IsZero() {
				c.log.printf("%s at %s answers, after %s", p.name, p.addr, time.Since(waitingSince).Round(time.Millisecond))
			}
			return nil
		case errors.As(err, &rejected):
			return err
		case ctx.Err() != nil:
			return context.Cause(ctx)
		}
		now := time.Now()
		switch {
		case waitingSince.IsZero():
			waitingSince, lastLog = now, now
			c.log.printf("waiting for %s at %s (gives up after %s): %v", p.name, p.addr, c.timeout, err)
		case now.Sub(lastLog) >= waitLogEvery:
			lastLog = now
			c.log.printf("still waiting for %s at %s, %s so far: %v", p.name, p.addr, now.Sub(waitingSince).Round(time.Second), err)
		}
		left := c.timeout - now.Sub(waitingSince)
		if left <= 0 {
			return &unreachableError{p, now.Sub(waitingSince), err}
		}
		if !sleep(ctx, min(backoff, left)) {
			return context.Cause(ctx)
		}
		backoff = min(2*backoff, backoffMax)
	}
}

func (c *peerClient) once(ctx context.Context, p peer, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &rejectedError{p, 0, "cannot encode the request: " + err.Error()}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, c.trace(p)), method, "http://"+p.addr+path, body)
	if err != nil {
		return &rejectedError{p, 0, err.Error()}
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e errorResponse
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = string(bytes.TrimSpace(b))
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return &rejectedError{p, resp.StatusCode, e.Error}
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, e.Error)
	}
	if err := json.Unmarshal(b, out); err != nil {
		// Something else answers on that port: not our peer yet, perhaps never. Retrying
		// until --peer-timeout covers both.
		return fmt.Errorf("bad answer: %w", err)
	}
	return nil
}

// trace logs, once per peer, the address its name led to: which pod, on which node, this
// replica's traffic reached (the e2e test checks that it crossed nodes).
func (c *peerClient) trace(p peer) *httptrace.ClientTrace {
	return &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if _, seen := c.reached.LoadOrStore(p.addr, true); !seen {
			c.log.printf("peer %s (%s) is at %s", p.name, p.addr, info.Conn.RemoteAddr())
		}
	}}
}

// sleep waits for d or until ctx ends; it reports whether the whole d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
