package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newTestPS(t *testing.T, shard, shards int, o Options) (*paramServer, peer) {
	t.Helper()
	ps := newParamServer(shard, shards, o, newLogger(io.Discard, "ps"))
	srv := httptest.NewServer(ps.handler())
	t.Cleanup(srv.Close)
	return ps, peer{"ps-" + string(rune('0'+shard)), strings.TrimPrefix(srv.URL, "http://")}
}

func TestParamServerProtocol(t *testing.T) {
	o := defaultOptions()
	o.LearningRate = 0.5
	_, p0 := newTestPS(t, 0, 2, o)
	_, p1 := newTestPS(t, 1, 2, o)
	c := newPSClient([]peer{p0, p1}, "worker-0", time.Second, newLogger(io.Discard, "worker-0"))
	ctx := context.Background()

	grad := make([]float64, NumParams)
	for i := range grad {
		grad[i] = float64(i + 1)
	}
	for range 2 {
		if _, err := c.push(ctx, grad); err != nil {
			t.Fatal(err)
		}
	}
	params, st, err := c.params(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two SGD steps from zero: p_i = -2 * 0.5 * (i+1), each parameter on its own shard.
	for i, p := range params {
		if want := -float64(i + 1); p != want {
			t.Errorf("param %d = %v, want %v", i, p, want)
		}
	}
	if st.Step != 2 || st.Done {
		t.Fatalf("status %+v, want step 2, not done", st)
	}
	if err := c.setDone(ctx, "converged"); err != nil {
		t.Fatal(err)
	}
	if _, st, _ = c.params(ctx); !st.Done || st.Reason != "converged" {
		t.Fatalf("status %+v, want done", st)
	}
	resp, err := http.Get("http://" + p0.addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"step":2,"done":true,"reason":"converged"}`; strings.TrimSpace(string(body)) != want {
		t.Fatalf("/v1/status = %s, want %s", body, want)
	}
}

func TestParamServerRefusals(t *testing.T) {
	o := defaultOptions()
	o.LearningRate = 1
	log := newLogger(io.Discard, "worker-0")
	_, p := newTestPS(t, 0, 1, o)
	ctx := context.Background()

	// A trainer that believes in two shards talks to a ps that knows it is alone.
	two := newPSClient([]peer{p, p}, "worker-0", time.Second, log)
	var rejected *rejectedError
	if _, _, err := two.params(ctx); !errors.As(err, &rejected) || rejected.status != http.StatusConflict || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("shard mismatch: %v", err)
	}

	one := newPSClient([]peer{p}, "worker-0", time.Second, log)
	huge := make([]float64, NumParams)
	huge[0] = 1e308
	if _, err := one.push(ctx, huge); err != nil {
		t.Fatal(err)
	}
	// -1e308 - 1e308 overflows to -Inf.
	if _, err := one.push(ctx, huge); !errors.As(err, &rejected) || rejected.status != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "diverged") {
		t.Fatalf("diverging gradient: %v", err)
	}
}

func TestPeerTimeout(t *testing.T) {
	dead := deadAddr(t)
	var out syncBuffer
	c := newPSClient([]peer{{"ps-0", dead}}, "worker-0", 300*time.Millisecond, newLogger(&out, "worker-0"))
	start := time.Now()
	_, _, err := c.params(context.Background())
	var unreachable *unreachableError
	if !errors.As(err, &unreachable) {
		t.Fatalf("err = %v, want unreachable", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("gave up after %s, want about 300ms", d)
	}
	if !strings.Contains(out.String(), "waiting for ps-0 at "+dead) {
		t.Errorf("log does not say what it waits for:\n%s", out.String())
	}
}
