package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlkube/mlkube/internal/tuifixture"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// groups are the benchmark's 8 replicas per job.
var groups = []tuifixture.Group{{Type: "MASTER", Replicas: 1}, {Type: "WORKER", Replicas: 5}, {Type: "PS", Replicas: 2}}

// results are what the benchmark reports. Latencies are in ms, CPU in % of one core.
type results struct {
	Jobs, PodCount int
	Machine        string
	Load           string // the machine's load average when the benchmark ended
	Populate       string // how long creating the objects took
	FirstScreen    string // from starting the dashboard to the frame whose title counts every job
	AllRows        string // ... to the frame with every job's row in (the title's "loading…" gone)

	// From the start of the status write to the frame that shows it (what a person sees
	// after an operator writes a status), and from the write's return (the apiserver has
	// committed it) to that frame.
	List, ListAfterWrite latency // the job list, a job's status
	Pods, PodsAfterWrite latency // the replica view, a pod's status

	IdleListYoung float64 // job list, nothing changing but ages under 2 minutes (a 1 Hz clock); with -reuse, older
	IdleList      float64 // job list, nothing changing
	IdlePods      float64 // replica view, nothing changing
	Busy          float64 // while ~7 statuses a second are written
	RSSMiB        float64
	PeakRSSMiB    float64
}

type latency struct{ N, P50, P90, P99, Max float64 }

func summary(xs []float64) latency {
	return latency{N: float64(len(xs)), P50: pct(xs, 50), P90: pct(xs, 90), P99: pct(xs, 99), Max: pct(xs, 100)}
}

func (l latency) String() string {
	return fmt.Sprintf("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms (%d writes)", l.P50, l.P90, l.P99, l.Max, int(l.N))
}

func bench(dir string, o options) error {
	ctx := context.Background()
	const ns = "bench"
	r := results{Jobs: o.jobs, PodCount: o.jobs * 8, Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}
	// Markers: restart counts no row has. A rerun on a reused control plane starts above the
	// last run's.
	jobMark, podMark := int32(100000), int32(200000)
	var c *tuifixture.Cluster
	var populated time.Time
	if o.kubeconfig != "" {
		var err error
		if c, err = reuse(o.kubeconfig); err != nil {
			return err
		}
		// A marker may not hold an earlier run's as a substring either: each run has a
		// 7-digit prefix of its own, the time in seconds mod 10^6, above every earlier one's
		// for 11 days.
		run := int32(1000000 + time.Now().Unix()%1000000)
		jobMark, podMark = run*1000, run*1000+500
		r.Populate = "reused"
		fmt.Printf("reusing the control plane of %s and its %d jobs\n", o.kubeconfig, o.jobs)
	} else {
		var err error
		if c, err = tuifixture.Start(dir); err != nil {
			return err
		}
		defer c.Stop()
		if err := c.Namespace(ctx, ns); err != nil {
			return err
		}
		fmt.Printf("creating %d jobs and %d pods on the envtest apiserver...\n", r.Jobs, r.PodCount)
		start := time.Now()
		if err := populate(ctx, c, ns, o.jobs); err != nil {
			return err
		}
		populated = time.Now()
		r.Populate = populated.Sub(start).Round(time.Second).String()
		fmt.Printf("created in %s\n", r.Populate)
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-child")
	cmd.Env = append(os.Environ(), "BENCH_KUBECONFIG="+c.Kubeconfig, "BENCH_NAMESPACE="+ns)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	d := newDashboard(stdin, stdout, cmd.Process.Pid)

	// The first frame with every job.
	seen, err := d.waitSeen(fmt.Sprintf("(%d)", o.jobs), 2*time.Minute)
	if err != nil {
		return err
	}
	r.FirstScreen = seen.Sub(started).Round(time.Millisecond).String()
	fmt.Printf("first screen with all %d jobs: %s\n", o.jobs, r.FirstScreen)
	// The first screen may be drawn from the first page of the list (kube.JobsPreview); the
	// whole list is in when the title stops saying it loads.
	if seen, err = d.waitSeen("!loading…", 2*time.Minute); err != nil {
		return err
	}
	r.AllRows = seen.Sub(started).Round(time.Millisecond).String()
	fmt.Printf("every job's row in: %s\n", r.AllRows)

	r.IdleListYoung = d.idle(o.idle)
	if o.kubeconfig == "" {
		fmt.Printf("job list idle, ages under 2 minutes (the clock ticks every second): %.2f%% of a core\n", r.IdleListYoung)
	} else {
		fmt.Printf("job list idle, its first minute (the reused jobs' ages count minutes already): %.2f%% of a core\n", r.IdleListYoung)
	}

	// Job list: a status write to one of the jobs on screen (the first 20 by name), then the
	// frame that shows it. The restart count is the marker: no other row has one that large.
	cpu0, t0 := d.cpu(), time.Now()
	list, listAfter, err := d.latencies(o.samples, func(i int) (string, func() error) {
		n := jobMark + int32(i)
		job := fmt.Sprintf("job-%03d", rand.IntN(20))
		return fmt.Sprint(n), func() error {
			return c.SetJobStatus(ctx, tuifixture.TfJob.Name, ns, job, v1beta1.JobStatus{Restarts: n})
		}
	})
	if err != nil {
		return err
	}
	r.Busy = d.cpuPercent(cpu0, d.cpu(), time.Since(t0))
	r.List, r.ListAfterWrite = summary(list), summary(listAfter)
	fmt.Printf("job list, change-to-screen: %s\n  from the write's return: %s\n", r.List, r.ListAfterWrite)

	// Replica view of job-000 (the cursor is on it): a pod status write, then the frame.
	if err := d.open("job-000-ps-1"); err != nil {
		return err
	}
	time.Sleep(time.Second)
	pods, podsAfter, err := d.latencies(o.samples, func(i int) (string, func() error) {
		n := podMark + int32(i)
		pod := tuifixture.PodName("job-000", "WORKER", rand.IntN(5))
		return fmt.Sprint(n), func() error {
			return c.SetPodStatus(ctx, ns, pod, tuifixture.PodRunning(tuifixture.TfJob.Container, n, 137, "Error"))
		}
	})
	if err != nil {
		return err
	}
	r.Pods, r.PodsAfterWrite = summary(pods), summary(podsAfter)
	fmt.Printf("replica view, change-to-screen: %s\n  from the write's return: %s\n", r.Pods, r.PodsAfterWrite)

	// Idle, once every age on screen counts minutes.
	if wait := time.Until(populated.Add(2*time.Minute + 5*time.Second)); wait > 0 {
		fmt.Printf("waiting %s for every job to be 2 minutes old...\n", wait.Round(time.Second))
		time.Sleep(wait)
	}
	r.IdlePods = d.idle(o.idle)
	fmt.Printf("replica view idle: %.2f%% of a core over %s\n", r.IdlePods, o.idle)
	d.key("esc")
	r.IdleList = d.idle(o.idle)
	fmt.Printf("job list idle: %.2f%% of a core over %s\n", r.IdleList, o.idle)

	r.RSSMiB, r.PeakRSSMiB = d.rss()
	fmt.Printf("memory: RSS %.1f MiB (peak %.1f MiB)\n", r.RSSMiB, r.PeakRSSMiB)
	fmt.Printf("CPU while statuses were written (~7 a second): %.2f%% of a core\n", r.Busy)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.Load = strings.Join(strings.Fields(string(b))[:3], " ")
		fmt.Printf("load average: %s\n", r.Load)
	}

	if o.json != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(o.json, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	d.key("q")
	return nil
}

// populate creates n running jobs of 8 running replicas, and an event for each.
func populate(ctx context.Context, c *tuifixture.Cluster, ns string, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("job-%03d", i)
		g.Go(func() error {
			uid, err := c.CreateJob(ctx, tuifixture.TfJob.Name, ns, name, groups, false)
			if err != nil {
				return err
			}
			if err := c.SetJobStatus(ctx, tuifixture.TfJob.Name, ns, name, tuifixture.Running(groups, 0)); err != nil {
				return err
			}
			pods, err := c.CreatePods(ctx, tuifixture.TfJob.Name, ns, name, uid, groups, "node-1")
			if err != nil {
				return err
			}
			for _, p := range pods {
				if err := c.SetPodStatus(ctx, ns, p, tuifixture.PodRunning(tuifixture.TfJob.Container, 0, 0, "")); err != nil {
					return err
				}
			}
			return c.RecordEvent(ctx, tuifixture.TfJob.Name, ns, name, uid, "Normal", "Created", "created 8 pods and 1 service")
		})
	}
	return g.Wait()
}

// dashboard is the child process running tfjob-tui.
type dashboard struct {
	in  io.Writer
	pid int

	mu      sync.Mutex
	waiting map[string]chan time.Time
	acks    map[string]chan struct{}
}

func newDashboard(in io.Writer, out io.Reader, pid int) *dashboard {
	d := &dashboard{in: in, pid: pid, waiting: map[string]chan time.Time{}, acks: map[string]chan struct{}{}}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			f := strings.Fields(s.Text())
			if len(f) < 2 {
				continue
			}
			d.mu.Lock()
			switch f[0] {
			case "ok":
				if ch, ok := d.acks[f[1]]; ok {
					close(ch)
					delete(d.acks, f[1])
				}
			case "seen":
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				if ch, ok := d.waiting[f[1]]; ok {
					ch <- time.Unix(0, ns)
					delete(d.waiting, f[1])
				}
			}
			d.mu.Unlock()
		}
	}()
	return d
}

// watch asks the child to report the frame that shows text, and returns where the report
// will come.
func (d *dashboard) watch(text string) (<-chan time.Time, error) {
	seen, ack := make(chan time.Time, 1), make(chan struct{})
	d.mu.Lock()
	d.waiting[text], d.acks[text] = seen, ack
	d.mu.Unlock()
	fmt.Fprintf(d.in, "watch %s\n", text)
	select {
	case <-ack:
		return seen, nil
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("the dashboard did not answer")
	}
}

func (d *dashboard) waitSeen(text string, timeout time.Duration) (time.Time, error) {
	seen, err := d.watch(text)
	if err != nil {
		return time.Time{}, err
	}
	select {
	case t := <-seen:
		return t, nil
	case <-time.After(timeout):
		return time.Time{}, fmt.Errorf("no frame showed %q within %s", text, timeout)
	}
}

func (d *dashboard) key(k string) { fmt.Fprintf(d.in, "key %s\n", k) }

// open presses enter and waits for the replica view to show text.
func (d *dashboard) open(text string) error {
	seen, err := d.watch(text)
	if err != nil {
		return err
	}
	d.key("enter")
	select {
	case <-seen:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the replica view did not show %q", text)
	}
}

// latencies makes n changes, one at a time, 50 to 150 ms apart (so the changes do not line
// up with the frame clock), and returns each one's time to the frame that shows it, in ms:
// from the start of the write, and from its return.
func (d *dashboard) latencies(n int, change func(i int) (string, func() error)) (fromStart, fromReturn []float64, err error) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for i := 0; i < n; i++ {
		marker, write := change(i)
		seen, err := d.watch(marker)
		if err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		if err := write(); err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		select {
		case t := <-seen:
			fromStart = append(fromStart, ms(t.Sub(t0)))
			fromReturn = append(fromReturn, ms(max(t.Sub(t1), 0)))
		case <-time.After(10 * time.Second):
			return nil, nil, fmt.Errorf("change %d (%s) never reached the screen", i, marker)
		}
		time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond)
	}
	return fromStart, fromReturn, nil
}

// cpu is the child's CPU time so far, in clock ticks (user + system).
func (d *dashboard) cpu() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const clockTicks = 100

func (d *dashboard) cpuPercent(from, to int64, over time.Duration) float64 {
	return float64(to-from) / clockTicks / over.Seconds() * 100
}

// idle measures the CPU the child uses over a spell where nothing changes.
func (d *dashboard) idle(over time.Duration) float64 {
	time.Sleep(time.Second)
	c0, t0 := d.cpu(), time.Now()
	time.Sleep(over)
	return d.cpuPercent(c0, d.cpu(), time.Since(t0))
}

// rss is the child's resident memory now and at its peak, in MiB.
func (d *dashboard) rss() (now, peak float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			now = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return now, peak
}

// pct is the p-th percentile of xs (nearest rank).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}

// reuse reaches the control plane of a kubeconfig (one that -demo started), whose namespace
// bench holds the jobs already.
func reuse(kubeconfig string) (*tuifixture.Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c := &tuifixture.Cluster{Config: cfg, Kubeconfig: kubeconfig}
	if c.Dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}
