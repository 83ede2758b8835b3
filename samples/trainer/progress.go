package main

// Progress reports: where the operator serves progress (docs/progress.md), it gives every
// replica's container three variables, and the decider (master, chief or worker 0, the DMLC
// scheduler, PyTorch rank 0, JAX process 0: the replica whose step is the training's) POSTs the
// global step to it, with --max-steps as the total and the losses as metrics:
//
//	MLKUBE_PROGRESS_URL         the https URL to POST a report to
//	MLKUBE_PROGRESS_TOKEN_FILE  a bearer token, rewritten by the kubelet before it expires: read on every report
//	MLKUBE_PROGRESS_CA_FILE     the CA bundle that signed the operator's certificate: read on every report
//
// A report is at most one a second, but the final one (the decider has decided) always goes. A
// report that fails (no answer within 2 s, a refusal, any status but 2xx) never stops the
// training: it logs one line, and another only when the error changes, and the next report waits
// 5 s, or what the operator's Retry-After says. Without MLKUBE_PROGRESS_URL nothing is sent.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	envProgressURL       = "MLKUBE_PROGRESS_URL"
	envProgressTokenFile = "MLKUBE_PROGRESS_TOKEN_FILE"
	envProgressCAFile    = "MLKUBE_PROGRESS_CA_FILE"

	progressEvery   = time.Second     // the operator takes about one report a second from a pod
	progressBackoff = 5 * time.Second // after a report that failed
	progressTimeout = 2 * time.Second
	retryAfterMax   = time.Minute
)

// metric is a named value of a report.
type metric struct {
	name  string
	value float64
}

// progressReporter sends progress reports to the operator; a nil one sends nothing.
type progressReporter struct {
	url, tokenFile, caFile  string
	every, backoff, timeout time.Duration
	now                     func() time.Time

	mu     sync.Mutex
	next   time.Time // no report before, but the final one
	failed string    // the kind of error last logged
}

// progressFromEnv is the reporter the operator's variables ask for; nil without
// MLKUBE_PROGRESS_URL.
func progressFromEnv(getenv func(string) string) *progressReporter {
	u := getenv(envProgressURL)
	if u == "" {
		return nil
	}
	return &progressReporter{
		url: u, tokenFile: getenv(envProgressTokenFile), caFile: getenv(envProgressCAFile),
		every: progressEvery, backoff: progressBackoff, timeout: progressTimeout, now: time.Now,
	}
}

// report sends step, of totalSteps (0: unknown), and metrics, unless a report went less than
// every ago, or a failed one less than the back-off; final sends it all the same. A failure is
// logged to log, once for each kind of error in a row.
func (p *progressReporter) report(log *logger, step, totalSteps int64, final bool, metrics ...metric) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !final && p.now().Before(p.next) {
		return
	}
	p.next = p.now().Add(p.every)
	kind, wait, err := p.send(progressBody(step, totalSteps, metrics))
	if err == nil {
		return
	}
	p.next = p.now().Add(max(p.backoff, wait))
	if kind != p.failed {
		p.failed = kind
		log.printf("progress report of step %d to %s failed: %v; training goes on (logged again only if the error changes)", step, p.url, err)
	}
}

// send POSTs one report; on failure, kind names the error (an HTTP status, a timeout, an errno)
// and wait is the operator's Retry-After.
func (p *progressReporter) send(body []byte) (kind string, wait time.Duration, err error) {
	if p.tokenFile == "" {
		return "token", 0, errors.New(envProgressTokenFile + " is not set")
	}
	token, err := os.ReadFile(p.tokenFile)
	if err != nil {
		return "token", 0, fmt.Errorf("reading the token: %w", err)
	}
	client, err := p.httpClient()
	if err != nil {
		return "ca", 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return "url", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which the log line has already
		}
		if kind = errorKind(err); kind == "timeout" {
			err = fmt.Errorf("no answer within %s (%w)", p.timeout, err)
		}
		return kind, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return "", 0, nil
	}
	why, _ := bufio.NewReader(io.LimitReader(resp.Body, 300)).ReadString('\n')
	if why = strings.TrimSpace(why); why != "" {
		why = ": " + why
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		wait = min(time.Duration(s)*time.Second, retryAfterMax)
	}
	return "HTTP " + strconv.Itoa(resp.StatusCode), wait, fmt.Errorf("HTTP %s%s", resp.Status, why)
}

// httpClient trusts the CA file as it is now (without one, the system's CAs), and opens a
// connection for each report: a report a second needs no pool, and a server that restarted leaves
// no dead connection to fail the next report on.
func (p *progressReporter) httpClient() (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.caFile != "" {
		ca, err := os.ReadFile(p.caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA: %w", err)
		}
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s %s holds no PEM certificate", envProgressCAFile, p.caFile)
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig, transport.DisableKeepAlives = tlsConfig, true
	return &http.Client{Transport: transport}, nil
}

// errorKind tells errors apart for the log: a timeout, an errno (refused, reset), a certificate
// not trusted, else the error's type.
func errorKind(err error) string {
	var netErr net.Error
	var errno syscall.Errno
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &certErr):
		return "certificate"
	}
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
		err = u
	}
	return fmt.Sprintf("%T", err)
}

// progressBody is a report as JSON, metrics in order; NaN and the infinities are written as
// Python's json module writes them (NaN, Infinity, -Infinity), which the operator reads.
func progressBody(step, totalSteps int64, metrics []metric) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"step":%d`, step)
	if totalSteps > 0 {
		fmt.Fprintf(&b, `,"totalSteps":%d`, totalSteps)
	}
	if len(metrics) > 0 {
		b.WriteString(`,"metrics":{`)
		for i, m := range metrics {
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(m.name)
			b.Write(name)
			b.WriteByte(':')
			switch v := m.value; {
			case math.IsNaN(v):
				b.WriteString("NaN")
			case math.IsInf(v, 1):
				b.WriteString("Infinity")
			case math.IsInf(v, -1):
				b.WriteString("-Infinity")
			default:
				b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes()
}
