package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/progress"
)

// With -report, the operator serves its progress endpoint on 127.0.0.1 (a port of its own
// choice) and every job's decider (its MASTER, replica 0) reports to it once per interval, from
// when the job is Created (all its pods exist) to the end of the run, as the sample trainers'
// rank 0 does: {"step": ..., "totalSteps": ..., "metrics": {"loss": ...}}, with a token the
// apiserver issues for that pod (the TokenRequest a kubelet makes for the projected volume) and
// the CA the operator wrote into the namespace. envtest runs no kubelet, so no pod runs: the
// bench is every decider at once, on one HTTP client that keeps its connections.

// progressFlags are the operator's flags with -report: the endpoint on a free port of 127.0.0.1,
// its certificate issued for that address.
var progressFlags = []string{"--progress-bind-address=127.0.0.1:0", "--progress-url=https://127.0.0.1"}

// reportConns is how many connections the bench keeps to the endpoint, and so how many reports
// are in flight at most.
const reportConns = 32

// reportTotal is every job's totalSteps: a training that never ends within the bench.
const reportTotal = 1 << 40

// reporter is the deciders of the jobs in one namespace.
type reporter struct {
	every time.Duration
	ns    string
	op    int // the operator's pid, whose listening socket is the endpoint
	c     client.Client
	cs    kubernetes.Interface
	epoch time.Time // steps are milliseconds since epoch: a training at 1000 steps a second

	setup  sync.Once
	url    string // the endpoint, up to the job's name
	client *http.Client

	stop chan struct{}
	wg   sync.WaitGroup

	// phase is what a report sent now counts in: 0 on the way to Created, 1 in the hold.
	phase atomic.Int32
	held  time.Time // when the hold began
	due   int64
	conns atomic.Int64 // connections opened

	mu sync.Mutex
	// sent, and the answers by status code or the kind of error, in each phase.
	sent    [2]int64
	answers [2]map[string]int
	// latencies of the answered reports: from the request to its answer, and from when it had
	// one of the bench's reportConns connections (in a cluster each trainer has its own).
	latencies, onConn []time.Duration
	accepted          map[string]int64 // each job's last accepted step
	started           map[string]time.Time
	stopped           time.Time
}

func newReporter(cfg *rest.Config, c client.Client, ns string, op int, every time.Duration) *reporter {
	cs, err := kubernetes.NewForConfig(cfg)
	check(err)
	// The default service account, which the apiserver issues the pods' tokens for: envtest
	// runs no controller that makes it. The operator names it in the pods it creates.
	check(client.IgnoreAlreadyExists(c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})))
	return &reporter{every: every, ns: ns, op: op, c: c, cs: cs, epoch: time.Now(), stop: make(chan struct{}),
		answers: [2]map[string]int{{}, {}}, accepted: map[string]int64{}, started: map[string]time.Time{}}
}

// start makes job's decider report from now on, every interval, until stopAll.
func (r *reporter) start(job string) {
	r.setup.Do(r.connect)
	r.mu.Lock()
	r.started[job] = time.Now()
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		token := r.token(job + "-" + strings.ToLower(groups[0].typ) + "-0")
		tick := time.NewTicker(r.every)
		defer tick.Stop()
		for {
			r.post(job, token)
			select {
			case <-r.stop:
				return
			case <-tick.C: // a report that took longer than the interval loses the ticks it missed
			}
		}
	}()
}

// connect finds the endpoint and trusts the CA of the namespace's bundle, which the operator
// wrote before it created the namespace's first pods.
func (r *reporter) connect() {
	ctx := context.Background()
	var cm corev1.ConfigMap
	check(r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: progress.TrustConfigMap}, &cm))
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[progress.TrustKey])) {
		check(fmt.Errorf("ConfigMap %s/%s holds no CA", r.ns, progress.TrustConfigMap))
	}
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	addr := endpointAddr(r.op, tlsConfig)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// HTTP/1.1, as trainers report (the samples' Go client and Python's urllib): over HTTP/2 the
	// bench's reports would share one connection.
	transport.TLSClientConfig, transport.ForceAttemptHTTP2 = tlsConfig, false
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost, transport.MaxConnsPerHost = reportConns, reportConns, reportConns
	r.client = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	r.url = "https://" + addr + progress.PathPrefix + r.ns + "/" + tfjob.Plural + "/"
}

// endpointAddr is the operator's listening socket on 127.0.0.1 that shows the certificate the
// namespace's CA signed: the progress endpoint (the operator's metrics and probes are off; a
// pprof address from BENCH_OPERATOR_FLAGS would be another).
func endpointAddr(pid int, tlsConfig *tls.Config) string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, addr := range listening(pid) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, tlsConfig)
			if err == nil {
				conn.Close()
				return addr
			}
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("the operator (pid %d) serves no progress endpoint on 127.0.0.1 that its CA signed, 30 s after its first job's pods", pid))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// listening is the addresses on 127.0.0.1 that process pid listens on, from /proc: the inodes
// of its sockets, found in the TCP table of its network namespace.
func listening(pid int) []string {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		// local_address is 0100007F:PORT for 127.0.0.1, in hex; st 0A is LISTEN.
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] || !strings.HasPrefix(f[1], "0100007F:") {
			continue
		}
		if port, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0100007F:"), 16, 16); err == nil {
			out = append(out, "127.0.0.1:"+strconv.FormatUint(port, 10))
		}
	}
	return out
}

// token is a token of the endpoint's audience bound to pod, as the kubelet projects it.
func (r *reporter) token(pod string) string {
	var err error
	for try := 0; try < 5; try++ {
		var tr *authnv1.TokenRequest
		tr, err = r.cs.CoreV1().ServiceAccounts(r.ns).CreateToken(context.Background(), "default", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
			Audiences:      []string{progress.Audience},
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod},
		}}, metav1.CreateOptions{})
		if err == nil {
			return tr.Status.Token
		}
		time.Sleep(time.Second)
	}
	check(fmt.Errorf("a token for pod %s: %w", pod, err))
	return ""
}

// post sends one report of job and counts its answer.
func (r *reporter) post(job, token string) {
	t0 := time.Now()
	step := t0.Sub(r.epoch).Milliseconds()
	body := fmt.Sprintf(`{"step": %d, "totalSteps": %d, "metrics": {"loss": %.4f}}`, step, int64(reportTotal), 2/(1+float64(step)/60000))
	req, err := http.NewRequest(http.MethodPost, r.url+job, strings.NewReader(body))
	check(err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	var conn time.Time
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
		conn = time.Now()
		if !c.Reused {
			r.conns.Add(1)
		}
	}}))
	phase := r.phase.Load()
	r.mu.Lock()
	r.sent[phase]++
	r.mu.Unlock()
	resp, err := r.client.Do(req)
	answer := ""
	if err != nil {
		answer = errorKind(err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body) // drained, so that the connection is kept
		resp.Body.Close()
		answer = strconv.Itoa(resp.StatusCode)
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[phase][answer]++
	if err == nil {
		r.latencies, r.onConn = append(r.latencies, now.Sub(t0)), append(r.onConn, now.Sub(conn))
	}
	if answer == "204" && step > r.accepted[job] {
		r.accepted[job] = step
	}
}

// errorKind names a failed request's error briefly, for counting.
func errorKind(err error) string {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Op + " error"
	}
	return "error"
}

// markHold makes the reports sent from now on count in the hold.
func (r *reporter) markHold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = time.Now()
	r.phase.Store(1)
}

// stopAll ends every reporter and waits for their reports in flight.
func (r *reporter) stopAll() {
	close(r.stop)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = time.Now()
	for _, t := range r.started {
		r.due += int64(r.stopped.Sub(t)/r.every) + 1
	}
}

// summary says what the reports were answered, in all and in the hold (by when they were
// sent), and how far behind the last accepted report each job's status.progress is, as listed
// right after the reporters stopped.
func (r *reporter) summary(jobs []v1beta1.TfJob) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	with, behind, worst := 0, 0.0, 0.0
	for _, j := range jobs {
		p := j.Status.Progress
		if p == nil {
			continue
		}
		with++
		lag := float64(r.accepted[j.Name]-p.Step) / 1000 // steps are milliseconds
		behind += lag
		worst = max(worst, lag)
	}
	if with > 0 {
		behind /= float64(with)
	}
	all := map[string]int{}
	for _, m := range r.answers {
		for k, v := range m {
			all[k] += v
		}
	}
	hold := "no hold"
	if !r.held.IsZero() {
		secs := r.stopped.Sub(r.held).Seconds()
		hold = fmt.Sprintf("in the hold %d sent (%.0f a second, of %.0f due), answers %s", r.sent[1], float64(r.sent[1])/secs,
			float64(len(r.started))*secs/r.every.Seconds(), answers(r.answers[1]))
	}
	return fmt.Sprintf("reports every %v from %d jobs: %d sent of %d due (a report slower than the interval skips the ticks it missed), answers %s; %s; "+
		"over %d connections opened (HTTP/1.1, at most %d at once); from the request to its answer p50 %s, p99 %s, max %s; from a connection to the answer p50 %s, p99 %s, max %s. "+
		"status.progress in %d of %d jobs right after the last report, behind each job's last accepted report by %.1f s on average, %.1f s at most",
		r.every, len(r.started), r.sent[0]+r.sent[1], r.due, answers(all), hold,
		r.conns.Load(), reportConns, pct(r.latencies, 0.5), pct(r.latencies, 0.99), pct(r.latencies, 1), pct(r.onConn, 0.5), pct(r.onConn, 0.99), pct(r.onConn, 1),
		with, len(jobs), behind, worst)
}

// answers writes counts by answer, in the order of the answers' names.
func answers(m map[string]int) string {
	var keys, out []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", k, m[k]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// pct is the p-th quantile of d, which it sorts.
func pct(d []time.Duration, p float64) string {
	if len(d) == 0 {
		return "-"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return fmt.Sprintf("%.1f ms", float64(d[int(p*float64(len(d)-1))].Microseconds())/1000)
}
