// Command bench measures the operator at scale against the floor the apiserver itself sets
// (`make bench`). For each N it starts a fresh kube-apiserver and etcd (internal/controlplane),
// runs the operator binary with its default flags, creates N TfJobs of 8 replicas (1 MASTER,
// 5 WORKER, 2 PS) and times the first create until every job's status says all its pods and
// services exist (condition Created). On another fresh control plane it times the floor: the
// same pods and services created directly, 16 at a time, with no client-side rate limit.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func main() {
	sizes := flag.String("n", "100,500,1000", "comma-separated numbers of TfJobs")
	flag.Parse()
	os.Setenv("MLKUBE_REQUIRE_ENVTEST", "1")
	ctrllog.SetLogger(logr.Discard())

	bin, err := buildOperator()
	check(err)
	fmt.Printf("| N | objects | floor (s) | operator (s) | ratio | operator peak RSS (MiB) | operator CPU (s) | apiserver CPU (s) | floor apiserver CPU (s) |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var perJob []string
	defer func() {
		fmt.Println("\nAPI requests per job, from the apiserver's own counters (the bench's own creates and polls included):")
		for _, l := range perJob {
			fmt.Println(l)
		}
	}()
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		check(err)
		floor, floorAPI := runFloor(n)
		r := runOperator(bin, n)
		fmt.Printf("| %d | %d | %.1f | %.1f | %.2f | %.0f | %.1f | %.1f | %.1f |\n",
			n, n*16, floor.Seconds(), r.took.Seconds(), r.took.Seconds()/floor.Seconds(), r.rssMiB, r.cpu, r.apiCPU, floorAPI)
		perJob = append(perJob, fmt.Sprintf("N=%d: %s", n, describe(r.perJob)))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func buildOperator() (string, error) {
	dir, err := os.MkdirTemp("", "mlkube-bench")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mlkube-operator")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mlkube/mlkube/operator/cmd/mlkube-operator")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	return bin, cmd.Run()
}

// start gives a fresh control plane and a client without client-side rate limits.
func start() (*envtest.Environment, *rest.Config, client.Client) {
	env, cfg, err := controlplane.Start()
	check(err)
	cfg.QPS, cfg.Burst = -1, 1000
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	check(err)
	return env, cfg, c
}

// replicas of one benchmark job, as the operator names them.
var groups = []struct {
	typ string
	n   int
}{{"MASTER", 1}, {"WORKER", 5}, {"PS", 2}}

func job(ns string, i int) *v1beta1.TfJob {
	j := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("job-%d", i)}}
	for _, g := range groups {
		j.Spec.ReplicaSpecs = append(j.Spec.ReplicaSpecs, v1beta1.TfReplicaSpec{
			TfReplicaType: v1beta1.TfReplicaType(g.typ), Replicas: int32(g.n),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:dev"}}}},
		})
	}
	return j
}

// parallel runs f(0..n-1) 16 at a time.
func parallel(n int, f func(i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// runFloor creates the pods and services of n jobs directly, as fast as the apiserver takes them.
func runFloor(n int) (time.Duration, float64) {
	env, cfg, c := start()
	defer env.Stop()
	ctx := context.Background()
	check(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "floor"}}))
	type obj struct{ pod, svc client.Object }
	var objs []obj
	for i := 0; i < n; i++ {
		for _, g := range groups {
			for k := 0; k < g.n; k++ {
				name := fmt.Sprintf("job-%d-%s-%d", i, strings.ToLower(g.typ), k)
				labels := map[string]string{"mlkube.io/job-name": fmt.Sprintf("job-%d", i), "mlkube.io/replica-type": strings.ToLower(g.typ), "mlkube.io/replica-index": strconv.Itoa(k)}
				objs = append(objs, obj{
					pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "floor", Name: name, Labels: labels},
						Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "tensorflow", Image: "mlkube/trainer:dev",
							Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: strings.Repeat("x", 400)}}}}}},
					svc: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "floor", Name: name, Labels: labels},
						Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Port: 2222}}}},
				})
			}
		}
	}
	api0 := apiserverCPU()
	defer profile(cfg, fmt.Sprintf("floor-%d", n))()
	t0 := time.Now()
	check(parallel(len(objs)*2, func(i int) error {
		o := objs[i/2]
		if i%2 == 0 {
			return c.Create(ctx, o.pod)
		}
		return c.Create(ctx, o.svc)
	}))
	return time.Since(t0), apiserverCPU() - api0
}

type result struct {
	perJob      map[string]float64 // apiserver requests per job, by verb and resource
	took        time.Duration
	rssMiB, cpu float64
	apiCPU      float64
}

// runOperator runs the operator binary with default flags and times n jobs to Created.
func runOperator(bin string, n int) result {
	env, cfg, c := start()
	defer env.Stop()
	kubeconfig := filepath.Join(os.TempDir(), "mlkube-bench.kubeconfig")
	check(os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	defer os.Remove(kubeconfig)
	args := []string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"}
	// The defaults are what is measured; extra flags are for exploring the knobs.
	args = append(args, strings.Fields(os.Getenv("BENCH_OPERATOR_FLAGS"))...)
	op := exec.Command(bin, args...)
	logf, err := os.CreateTemp("", "mlkube-bench-operator-*.log")
	check(err)
	defer os.Remove(logf.Name())
	op.Stdout, op.Stderr = logf, logf
	check(op.Start())
	defer func() { _ = op.Process.Kill(); _ = op.Wait() }()

	ctx := context.Background()
	check(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}))
	time.Sleep(2 * time.Second) // the operator's caches sync
	api0, op0 := apiserverCPU(), procCPU(op.Process.Pid)
	req0 := requests(cfg)
	stopProfile := profile(cfg, fmt.Sprintf("operator-%d", n))

	t0 := time.Now()
	check(parallel(n, func(i int) error { return c.Create(ctx, job("bench", i)) }))
	if os.Getenv("BENCH_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "jobs created after %.1fs\n", time.Since(t0).Seconds())
	}
	for {
		var list v1beta1.TfJobList
		check(c.List(ctx, &list, client.InNamespace("bench")))
		done := 0
		for _, j := range list.Items {
			if meta.IsStatusConditionTrue(j.Status.Conditions, v1beta1.JobCreated) {
				done++
			}
		}
		if os.Getenv("BENCH_TRACE") != "" {
			var pods corev1.PodList
			check(c.List(ctx, &pods, client.InNamespace("bench")))
			fmt.Fprintf(os.Stderr, "%.1fs: %d pods, %d jobs Created\n", time.Since(t0).Seconds(), len(pods.Items), done)
		}
		if done == n {
			break
		}
		if time.Since(t0) > 30*time.Minute {
			check(fmt.Errorf("only %d of %d jobs created after 30 minutes; operator log: %s", done, n, logf.Name()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(t0)
	stopProfile()
	r := result{took: took, rssMiB: peakRSS(op.Process.Pid) / 1024, cpu: procCPU(op.Process.Pid) - op0, apiCPU: apiserverCPU() - api0}
	r.perJob = map[string]float64{}
	for k, v := range requests(cfg) {
		if d := v - req0[k]; d > 0 {
			r.perJob[k] = d / float64(n)
		}
	}

	var pods corev1.PodList
	check(c.List(ctx, &pods, client.InNamespace("bench")))
	var svcs corev1.ServiceList
	check(c.List(ctx, &svcs, client.InNamespace("bench")))
	if len(pods.Items) != n*8 || len(svcs.Items) != n*8 {
		check(fmt.Errorf("%d pods and %d services for %d jobs", len(pods.Items), len(svcs.Items), n))
	}
	return r
}

// profile records the apiserver's CPU profile for BENCH_PROFILE_SECONDS (default 10) into
// $BENCH_PROFILE/apiserver-<name>.pprof when BENCH_PROFILE is set, to see where its time goes
// (go tool pprof -top). The returned func waits for it.
func profile(cfg *rest.Config, name string) (wait func()) {
	dir := os.Getenv("BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	seconds := os.Getenv("BENCH_PROFILE_SECONDS")
	if seconds == "" {
		seconds = "10"
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc, err := rest.HTTPClientFor(cfg)
		check(err)
		resp, err := rc.Get(strings.TrimRight(cfg.Host, "/") + "/debug/pprof/profile?seconds=" + seconds)
		check(err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		check(err)
		check(os.WriteFile(filepath.Join(dir, "apiserver-"+name+".pprof"), data, 0o644))
	}()
	return func() { <-done }
}

// procCPU is a process's user+system CPU seconds, from /proc.
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// peakRSS is a process's peak resident set in KiB (VmHWM).
func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			v, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return v
		}
	}
	return 0
}

// apiserverCPU is the CPU seconds of the kube-apiserver this process started.
func apiserverCPU() float64 {
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || !strings.Contains(string(stat), "(kube-apiserver)") {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if f[1] == self {
			return procCPU(pid)
		}
	}
	return 0
}

// requests reads apiserver_request_total from the apiserver's /metrics, by "verb resource/sub".
func requests(cfg *rest.Config) map[string]float64 {
	rc, err := rest.HTTPClientFor(cfg)
	check(err)
	resp, err := rc.Get(strings.TrimRight(cfg.Host, "/") + "/metrics")
	check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	check(err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[strings.Index(line, "{")+1:strings.LastIndex(line, "}")], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		if c := labels["code"]; c != "" && c[0] != '2' {
			key += " (" + c + ")"
		}
		out[key] += v
	}
	return out
}

func describe(m map[string]float64) string {
	var keys []string
	total := 0.0
	for k, v := range m {
		if v >= 0.05 {
			keys = append(keys, k)
			total += v
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
	}
	return fmt.Sprintf("%.1f in all: %s", total, strings.Join(parts, ", "))
}
