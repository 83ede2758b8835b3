package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// progressServer stands in for the operator's progress endpoint: it records every request and
// answers with the next planned answer, else 204.
type progressServer struct {
	*httptest.Server
	t      *testing.T
	caFile string // its certificate, PEM

	mu       sync.Mutex
	requests []progressRequest
	plan     []progressAnswer
}

type progressRequest struct {
	method, path, auth, contentType, body string
}

type progressAnswer struct {
	status     int
	retryAfter string
	body       string
}

func newProgressServer(t *testing.T) *progressServer {
	s := &progressServer{t: t}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes a test fails on purpose
	s.StartTLS()
	t.Cleanup(s.Close)
	s.caFile = filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, s.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})))
	return s
}

func (s *progressServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("reading a report: %v", err)
	}
	s.mu.Lock()
	s.requests = append(s.requests, progressRequest{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(body)})
	answer := progressAnswer{status: http.StatusNoContent}
	if len(s.plan) > 0 {
		answer, s.plan = s.plan[0], s.plan[1:]
	}
	s.mu.Unlock()
	if answer.retryAfter != "" {
		w.Header().Set("Retry-After", answer.retryAfter)
	}
	w.WriteHeader(answer.status)
	fmt.Fprint(w, answer.body)
}

func (s *progressServer) answer(answers ...progressAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = append(s.plan, answers...)
}

func (s *progressServer) got() []progressRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// steps are the steps of the reports so far.
func (s *progressServer) steps() []int64 {
	var steps []int64
	for _, r := range s.got() {
		steps = append(steps, s.report(r).Step)
	}
	return steps
}

type progressReport struct {
	Step       int64              `json:"step"`
	TotalSteps int64              `json:"totalSteps"`
	Metrics    map[string]float64 `json:"metrics"`
}

func (s *progressServer) report(r progressRequest) progressReport {
	var rep progressReport
	if err := json.Unmarshal([]byte(r.body), &rep); err != nil {
		s.t.Fatalf("report %q: %v", r.body, err)
	}
	return rep
}

// reporter reports to s with the token in a file of its own, on clock (nil: the real one).
func (s *progressServer) reporter(token string, clock *fakeClock) *progressReporter {
	tokenFile := filepath.Join(s.t.TempDir(), "token")
	writeFile(s.t, tokenFile, token+"\n")
	p := progressFromEnv(func(k string) string {
		return map[string]string{
			envProgressURL:       s.URL + "/v1/progress/namespaces/default/tfjobs/job",
			envProgressTokenFile: tokenFile,
			envProgressCAFile:    s.caFile,
		}[k]
	})
	if clock != nil {
		p.now = clock.now
	}
	return p
}

// writeFile replaces path's content at once, as the kubelet swaps a projected token.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestProgressFromEnv(t *testing.T) {
	if p := progressFromEnv(func(string) string { return "" }); p != nil {
		t.Errorf("without %s: %+v, want nil", envProgressURL, p)
	}
	var p *progressReporter
	p.report(newLogger(t.Output(), "master-0"), 1, 10, true) // nil: nothing, no panic
}

func TestProgressHeadersAndBody(t *testing.T) {
	s := newProgressServer(t)
	var log syncBuffer
	p := s.reporter("tok-one", newFakeClock())
	p.report(newLogger(&log, "master-0"), 120, 1000, false, metric{"loss", 0.42}, metric{"eval_loss", 1e-5})
	got := s.got()
	want := progressRequest{http.MethodPost, "/v1/progress/namespaces/default/tfjobs/job", "Bearer tok-one", "application/json",
		`{"step":120,"totalSteps":1000,"metrics":{"loss":0.42,"eval_loss":1e-05}}`}
	if len(got) != 1 || got[0] != want {
		t.Errorf("requests %+v, want %+v", got, want)
	}
	if log.String() != "" {
		t.Errorf("logged %q", log.String())
	}
}

func TestProgressBody(t *testing.T) {
	for _, c := range []struct {
		step, total int64
		metrics     []metric
		want        string
	}{
		{7, 0, nil, `{"step":7}`},
		{0, 5000, nil, `{"step":0,"totalSteps":5000}`},
		{3, 0, []metric{{"loss", 1.5}, {"nan", nan()}, {"up", inf(1)}, {"down", inf(-1)}, {"big", 1e300}},
			`{"step":3,"metrics":{"loss":1.5,"nan":NaN,"up":Infinity,"down":-Infinity,"big":1e+300}}`},
	} {
		if got := string(progressBody(c.step, c.total, c.metrics)); got != c.want {
			t.Errorf("progressBody(%d, %d, %v) = %s, want %s", c.step, c.total, c.metrics, got, c.want)
		}
	}
}

func TestProgressTokenReadEveryTime(t *testing.T) {
	s := newProgressServer(t)
	clock := newFakeClock()
	p := s.reporter("tok-one", clock)
	log := newLogger(t.Output(), "master-0")
	p.report(log, 1, 10, false)
	writeFile(t, p.tokenFile, "tok-two\n")
	clock.advance(time.Second)
	p.report(log, 2, 10, false)
	var auths []string
	for _, r := range s.got() {
		auths = append(auths, r.auth)
	}
	if want := []string{"Bearer tok-one", "Bearer tok-two"}; !slices.Equal(auths, want) {
		t.Errorf("Authorization %q, want %q", auths, want)
	}
}

// At most a report a second, but always the last.
func TestProgressThrottleAndFinal(t *testing.T) {
	s := newProgressServer(t)
	clock := newFakeClock()
	p := s.reporter("tok-one", clock)
	log := newLogger(t.Output(), "master-0")
	for step := int64(1); step <= 10; step++ {
		p.report(log, step, 10, step == 10, metric{"loss", 1 / float64(step)})
		clock.advance(250 * time.Millisecond)
	}
	if got, want := s.steps(), []int64{1, 5, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("reported steps %v, want %v", got, want)
	}
}

// Refusals and a server gone: each kind of error is logged once, the training goes on at once,
// and the token is never logged.
func TestProgressErrorsLoggedOnce(t *testing.T) {
	s := newProgressServer(t)
	s.answer(progressAnswer{http.StatusTooManyRequests, "1", "too fast: 1 report a second\n"},
		progressAnswer{http.StatusTooManyRequests, "1", "too fast"},
		progressAnswer{http.StatusTooManyRequests, "1", "too fast"},
		progressAnswer{http.StatusInternalServerError, "", "oops"},
		progressAnswer{http.StatusInternalServerError, "", "oops"})
	clock := newFakeClock()
	const token = "tok-3f9a.secret"
	p := s.reporter(token, clock)
	var out syncBuffer
	log := newLogger(&out, "master-0")
	step := int64(0)
	report := func(n int, final bool) {
		for range n {
			step++
			start := time.Now()
			p.report(log, step, 100, final, metric{"loss", 0.5})
			if took := time.Since(start); took > time.Second {
				t.Errorf("report of step %d took %s", step, took)
			}
			clock.advance(10 * time.Second) // past the throttle and any back-off
		}
	}
	report(5, false)
	if got := s.steps(); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("reported steps %v", got)
	}
	s.Close()
	report(2, false) // refused
	report(1, true)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		`^master-0 step=0 progress report of step 1 to https://127\.0\.0\.1:\d+/v1/progress/namespaces/default/tfjobs/job failed: HTTP 429 Too Many Requests: too fast: 1 report a second; training goes on \(logged again only if the error changes\)$`,
		`^master-0 step=0 progress report of step 4 to .* failed: HTTP 500 Internal Server Error: oops; `,
		`^master-0 step=0 progress report of step 6 to .* failed: dial tcp 127\.0\.0\.1:\d+: connect: connection refused; `,
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %q", i, lines[i], re)
		}
	}
	if strings.Contains(out.String(), token) {
		t.Errorf("the token is in the log:\n%s", out.String())
	}
}

// After a failure the next report waits the back-off, or the Retry-After when longer; the final
// report does not wait.
func TestProgressBackoffAndRetryAfter(t *testing.T) {
	s := newProgressServer(t)
	s.answer(progressAnswer{http.StatusServiceUnavailable, "", "not the leader"}, progressAnswer{http.StatusTooManyRequests, "7", "slow down"})
	clock := newFakeClock()
	p := s.reporter("tok-one", clock)
	p.backoff = 3 * time.Second
	log := newLogger(t.Output(), "master-0")
	p.report(log, 1, 0, false) // 503: the next waits 3 s
	clock.advance(2900 * time.Millisecond)
	p.report(log, 2, 0, false)
	clock.advance(100 * time.Millisecond)
	p.report(log, 3, 0, false) // 429, Retry-After: 7
	clock.advance(6900 * time.Millisecond)
	p.report(log, 4, 0, false)
	p.report(log, 5, 0, true) // the last, whatever the wait
	clock.advance(900 * time.Millisecond)
	p.report(log, 6, 0, false) // a second after the last report, which went through
	clock.advance(100 * time.Millisecond)
	p.report(log, 7, 0, false)
	if got, want := s.steps(), []int64{1, 3, 5, 7}; !slices.Equal(got, want) {
		t.Errorf("reported steps %v, want %v", got, want)
	}
}

// The CA file is read on every report: a client that did not trust the server does once the
// file holds the right CA.
func TestProgressCAReadEveryTime(t *testing.T) {
	s := newProgressServer(t)
	p := s.reporter("tok-one", newFakeClock())
	writeFile(t, p.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherCert(t)})))
	var out syncBuffer
	log := newLogger(&out, "master-0")
	p.report(log, 1, 0, true)
	if got := s.got(); len(got) != 0 || !strings.Contains(out.String(), "failed: tls: failed to verify certificate") {
		t.Fatalf("requests %v; log:\n%s", got, out.String())
	}
	writeFile(t, p.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})))
	p.report(log, 2, 0, true)
	if got := s.steps(); !slices.Equal(got, []int64{2}) {
		t.Errorf("reported steps %v, want [2]; log:\n%s", got, out.String())
	}
	writeFile(t, p.caFile, "no PEM here")
	p.report(log, 3, 0, true)
	wantInLog(t, "master-0", out.String(), "failed: MLKUBE_PROGRESS_CA_FILE "+p.caFile+" holds no PEM certificate")
}

// otherCert is a self-signed CA certificate for 127.0.0.1 that the server does not have.
func otherCert(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func nan() float64         { return math.NaN() }
func inf(sign int) float64 { return math.Inf(sign) }

// A server that accepts and never answers costs a report its timeout, no more.
func TestProgressTimeout(t *testing.T) {
	ln := listenLoopback(t)
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	s := newProgressServer(t)
	p := s.reporter("tok-one", nil)
	p.url = "https://" + ln.Addr().String() + "/v1/progress"
	p.timeout = 200 * time.Millisecond
	var out syncBuffer
	start := time.Now()
	p.report(newLogger(&out, "master-0"), 1, 0, true)
	if took := time.Since(start); took > time.Second {
		t.Errorf("the report took %s", took)
	}
	wantInLog(t, "master-0", out.String(), "failed: no answer within 200ms (context deadline exceeded); training goes on")
}

func TestProgressTokenMissing(t *testing.T) {
	s := newProgressServer(t)
	p := s.reporter("tok-one", newFakeClock())
	os.Remove(p.tokenFile)
	var out syncBuffer
	log := newLogger(&out, "master-0")
	p.report(log, 1, 0, true)
	p.tokenFile = ""
	p.report(log, 2, 0, true) // the same kind: not logged again
	if got := s.got(); len(got) != 0 {
		t.Errorf("requests %v, want none", got)
	}
	if n := strings.Count(out.String(), "\n"); n != 1 || !strings.Contains(out.String(), "failed: reading the token: open ") {
		t.Errorf("log:\n%s", out.String())
	}
}

// wantDeciderReports checks that the replica with token reported, and it alone, that its last
// report is the final step its log says, of total steps, with metrics.
func wantDeciderReports(t *testing.T, s *progressServer, token, log string, total int64, metrics ...string) {
	t.Helper()
	got := s.got()
	if len(got) == 0 {
		t.Fatalf("no report")
	}
	var last progressReport
	for i, r := range got {
		if r.auth != "Bearer "+token {
			t.Errorf("a report from %q: only the decider reports", r.auth)
		}
		rep := s.report(r)
		if i > 0 && rep.Step < last.Step {
			t.Errorf("report %d: step %d after %d", i, rep.Step, last.Step)
		}
		last = rep
	}
	m := regexp.MustCompile(`step=(\d+) converged: eval loss`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the decider did not converge:\n%s", log)
	}
	// The log line's step is the global step as it printed, which a gradient applied meanwhile
	// (the DMLC scheduler holds the parameters too) may have moved one past the judged one.
	final, _ := strconv.ParseInt(m[1], 10, 64)
	if last.Step < final-1 || last.Step > final || last.TotalSteps != total {
		t.Errorf("last report %+v, want step %d of %d", last, final, total)
	}
	var names []string
	for name := range last.Metrics {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, metrics) {
		t.Errorf("last report's metrics %v, want %v", last.Metrics, metrics)
	}
	if last.Metrics["eval_loss"] >= 0.01 {
		t.Errorf("last eval_loss %v, want it under the threshold", last.Metrics["eval_loss"])
	}
}

// In a TfJob the decider reports, the other workers not.
func TestProgressTfJob(t *testing.T) {
	s := newProgressServer(t)
	c := newTestCluster(t, map[string]int{typeMaster: 1, typeWorker: 1})
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	wo := o
	wo.Progress = s.reporter("tok-worker", nil)
	w0 := c.start(ctx, typeWorker, 0, wo)
	mo := o
	mo.Progress = s.reporter("tok-master", nil)
	wait(t, "master-0", c.start(ctx, typeMaster, 0, mo), 0)
	wait(t, "worker-0", w0, 0)
	wantDeciderReports(t, s, "tok-master", c.log("master-0"), o.MaxSteps, "eval_loss", "loss")
}

// In a PyTorchJob rank 0 reports, the other ranks not.
func TestProgressPyTorchJob(t *testing.T) {
	s := newProgressServer(t)
	j := newPTJob(t, 2)
	wo := j.o
	wo.Progress = s.reporter("tok-worker", nil)
	w0 := j.start("worker-0", 1, nil, wo)
	mo := j.o
	mo.Progress = s.reporter("tok-master", nil)
	wait(t, "master-0", j.start("master-0", 0, nil, mo), 0)
	wait(t, "worker-0", w0, 0)
	wantDeciderReports(t, s, "tok-master", j.log("master-0"), j.o.MaxSteps, "eval_loss", "loss")
}

// In an MXJob the scheduler reports: it watches the workers' step.
func TestProgressMXJob(t *testing.T) {
	s := newProgressServer(t)
	j := newMXJob(t, 0, 1)
	o := testOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	wo := o
	wo.Progress = s.reporter("tok-worker", nil)
	w0 := j.start(ctx, "worker-0", roleWorker, "mx-worker-0", nil, wo)
	so := o
	so.Progress = s.reporter("tok-scheduler", nil)
	wait(t, "scheduler", j.start(ctx, "scheduler", roleScheduler, "test", nil, so), 0)
	wait(t, "worker-0", w0, 0)
	wantDeciderReports(t, s, "tok-scheduler", j.log("scheduler"), o.MaxSteps, "eval_loss")
}
