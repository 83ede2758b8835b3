// Command bench measures the operator at scale against the floor the apiserver itself sets
// (`make bench`). For each N it starts a fresh kube-apiserver and etcd (internal/controlplane),
// runs the operator binary with its default flags, creates N TfJobs of 8 replicas (1 MASTER,
// 5 WORKER, 2 PS) and times the first create until every job's status says all its pods and
// its service exist (condition Created). On other fresh control planes it times two floors,
// each created directly, 16 requests at a time, with no client-side rate limit: the 16-object
// floor, the 8 pods and 8 per-replica services a job needs in the layout every other TensorFlow
// operator uses, timed before the operator and again after it, and the mean of the two taken;
// and the job floor of mlkube's layout, 8 pods and one service a job plus what
// each job itself costs the apiserver (its create, one status write, one event). Its TfJobs are
// watched, not polled. With -report, every job's decider reports its progress to the operator's
// endpoint once per interval from when the job is Created (report.go), and the operator runs
// on for -hold after the last job is Created, to measure what the reports cost. Then it times
// fairness between tenants: one job created in a namespace right after 1000 in another, until
// it has all its pods. With -costs it measures instead what a job's own requests cost the
// apiserver (costs.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/admitted"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func main() {
	sizes := flag.String("n", "100,500,1000", "comma-separated numbers of TfJobs")
	floors := flag.Bool("floors", true, "measure the floors too; -floors=false runs only the operator, for quick looks at its knobs")
	fairness := flag.Int("fairness", 1000, "jobs created in namespace tenant-a before one in tenant-b, to time how long tenant-b's job waits for its pods behind them; 0 skips it")
	costs := flag.Bool("costs", false, "instead, measure what a job's own requests (its create and status write) cost the apiserver, with the CRD as shipped and two cheaper variants")
	var o runOptions
	flag.DurationVar(&o.report, "report", 0, "every job's decider (MASTER 0) reports its progress to the operator's endpoint this often, from when the job is Created to the end of its run (the endpoint on 127.0.0.1); 0 sends none")
	flag.DurationVar(&o.hold, "hold", 0, "after every job is Created, keep the operator (and with -report, the reports) running this long and measure what it costs meanwhile; with -report, 60s unless set")
	flag.Parse()
	holdSet := false
	flag.Visit(func(f *flag.Flag) { holdSet = holdSet || f.Name == "hold" })
	if o.report > 0 && !holdSet {
		o.hold = time.Minute
	}
	os.Setenv("MLKUBE_REQUIRE_ENVTEST", "1")
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		check(fmt.Errorf("%v", <-sig))
	}()
	ctrllog.SetLogger(logr.Discard())

	if *costs {
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			check(err)
			runCosts(n)
		}
		return
	}
	bin, err := buildOperator()
	atExit(func() { os.RemoveAll(filepath.Dir(bin)) })
	defer os.RemoveAll(filepath.Dir(bin))
	check(err)
	fmt.Printf("| N | objects | 16-object floor (s) | operator (s) | ratio | job floor (s) | ratio to it | operator peak RSS (MiB) | of it the binary (MiB) | operator CPU (s) | apiserver CPU (s) | floor apiserver CPU (s) | job floor apiserver CPU (s) |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var perJob, floorNotes, holds []string
	defer func() {
		fmt.Println("\nAPI requests per job, from the apiserver's own counters (the bench's own creates and polls included):")
		for _, l := range perJob {
			fmt.Println(l)
		}
		if len(holds) > 0 {
			fmt.Printf("\nAfter every job was Created, the operator ran on for %v:\n", o.hold)
			for _, l := range holds {
				fmt.Println(l)
			}
		}
		if len(floorNotes) > 0 {
			fmt.Println("\nThe 16-object floor in the table is the mean of two runs:")
			for _, l := range floorNotes {
				fmt.Println(l)
			}
		}
	}()
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		check(err)
		floor, jobFloor := "| - | - | - | - |", "| - | - | - | - |"
		var floorTook, jobFloorTook time.Duration
		var floorAPI, jobFloorAPI float64
		if *floors {
			floorTook, floorAPI = runFloor(n, false)
			jobFloorTook, jobFloorAPI = runFloor(n, true)
		}
		r := runOperator(bin, n, o)
		if *floors {
			// The 16-object floor again, after the operator: on a shared machine its speed
			// drifts by tens of percent over minutes, and the mean of a floor taken before and
			// one after is what the operator's run is compared with.
			after, afterAPI := runFloor(n, false)
			floorNotes = append(floorNotes, fmt.Sprintf("N=%d: %.1f s before the operator, %.1f s after", n, floorTook.Seconds(), after.Seconds()))
			floorTook, floorAPI = (floorTook+after)/2, (floorAPI+afterAPI)/2
			floor = fmt.Sprintf("| %.1f | %.1f | %.2f |", floorTook.Seconds(), r.took.Seconds(), r.took.Seconds()/floorTook.Seconds())
			jobFloor = fmt.Sprintf(" %.1f | %.2f |", jobFloorTook.Seconds(), r.took.Seconds()/jobFloorTook.Seconds())
		} else {
			floor, jobFloor = fmt.Sprintf("| - | %.1f | - |", r.took.Seconds()), " - | - |"
		}
		fmt.Printf("| %d | %d %s%s %.0f | %.0f | %.1f | %.1f | %.1f | %.1f |\n",
			n, n*9, floor, jobFloor, r.rssMiB, r.binaryMiB, r.cpu, r.apiCPU, floorAPI, jobFloorAPI)
		perJob = append(perJob, fmt.Sprintf("N=%d: %s", n, describe(r.perJob)))
		holds = append(holds, r.holdLines(n)...)
	}
	if *fairness > 0 {
		runFairness(bin, *fairness)
	}
}

var (
	exitMu sync.Mutex
	onExit []func()
)

// atExit registers what check must undo before the bench exits on an error: the control planes
// and the operator it started would outlive it otherwise.
func atExit(f func()) {
	exitMu.Lock()
	defer exitMu.Unlock()
	onExit = append(onExit, f)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		exitMu.Lock() // held to the end: one goroutine cleans up, the others wait for the exit
		for i := len(onExit) - 1; i >= 0; i-- {
			onExit[i]()
		}
		os.Exit(1)
	}
}

func buildOperator() (string, error) {
	dir, err := os.MkdirTemp("", "mlkube-bench")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mlkube-operator")
	// Built as `make build` and the image build it: stripped, which also keeps the symbol
	// table out of the resident set measured.
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "github.com/mlkube/mlkube/operator/cmd/mlkube-operator")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	return bin, cmd.Run()
}

// start gives a fresh control plane and a client without client-side rate limits.
func start(options ...func(*envtest.Environment)) (*envtest.Environment, *rest.Config, client.Client) {
	env, cfg, err := controlplane.Start(options...)
	check(err)
	atExit(func() { _ = env.Stop() })
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

// tfjob is the kind the bench runs: its row of the table.
var tfjob = v1beta1.KindOf(&v1beta1.TfJob{})

func job(ns string, i int) *v1beta1.TfJob {
	j := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("job-%d", i)}}
	for _, g := range groups {
		j.Spec.ReplicaSpecs = append(j.Spec.ReplicaSpecs, v1beta1.TfReplicaSpec{
			TfReplicaType: v1beta1.TfReplicaType(g.typ), Replicas: int32(g.n),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: tfjob.Container, Image: "mlkube/trainer:dev"}}}},
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

// runFloor creates the pods and services of n jobs directly, as fast as the apiserver takes
// them, 16 requests at a time. Without jobs: the 16-object floor, a service per replica. With
// jobs: mlkube's layout, one service a job, and what every job costs the apiserver on the
// operator's path besides: the TfJob's own create, one status write and one event. That job
// floor is what no operator of this layout can go below.
func runFloor(n int, withJobs bool) (time.Duration, float64) {
	env, cfg, c := start()
	defer env.Stop()
	ctx := context.Background()
	check(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "floor"}}))
	objs := floorObjects("floor", n, withJobs)
	api0 := apiserverCPU()
	defer profile(cfg, fmt.Sprintf("floor-%d-jobs-%v", n, withJobs))()
	t0 := time.Now()
	if !withJobs {
		check(parallel(len(objs), func(i int) error { return c.Create(ctx, objs[i]) }))
		return time.Since(t0), apiserverCPU() - api0
	}
	// Each kind of request 16 at a time, as the plain floor: the TfJobs, then their pods and
	// services, then their status writes and events.
	jobs := make([]*v1beta1.TfJob, n)
	check(parallel(n, func(i int) error { jobs[i] = job("floor", i); return c.Create(ctx, jobs[i]) }))
	check(parallel(len(objs), func(i int) error { return c.Create(ctx, objs[i]) }))
	check(parallel(n*2, func(i int) error {
		j := jobs[i/2]
		if i%2 == 0 {
			// On a copy: the patch decodes its answer into the object it is given, while the
			// event beside it reads the job's name and UID.
			return c.Status().Patch(ctx, j.DeepCopy(), client.RawPatch(types.MergePatchType, createdStatus))
		}
		return c.Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "floor", Name: j.Name + ".created"},
			EventTime:  metav1.NowMicro(), ReportingController: "bench", ReportingInstance: "bench",
			Action: "Create", Reason: "Created", Note: "created 8 pods and 1 service", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{APIVersion: v1beta1.GroupVersion.String(), Kind: tfjob.Name, Namespace: "floor", Name: j.Name, UID: j.UID},
		})
	}))
	return time.Since(t0), apiserverCPU() - api0
}

// floorObjects are the pods and services of n jobs in namespace ns, as an operator would make
// them (names, labels, a TF_CONFIG of about the same size): with oneService, 8 pods and the
// job's headless service; without, 8 pods and a service for each.
func floorObjects(ns string, n int, oneService bool) []client.Object {
	var objs []client.Object
	for i := 0; i < n; i++ {
		jobName := fmt.Sprintf("job-%d", i)
		jobLabels := map[string]string{v1beta1.LabelJobName: jobName, v1beta1.LabelJobKind: tfjob.Label()}
		if oneService {
			objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: jobName, Labels: jobLabels},
				Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: jobLabels, PublishNotReadyAddresses: true}})
		}
		for _, g := range groups {
			for k := 0; k < g.n; k++ {
				name := fmt.Sprintf("%s-%s-%d", jobName, strings.ToLower(g.typ), k)
				labels := map[string]string{v1beta1.LabelJobName: jobName, v1beta1.LabelJobKind: tfjob.Label(), v1beta1.LabelReplicaType: strings.ToLower(g.typ), v1beta1.LabelReplicaIndex: strconv.Itoa(k)}
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: tfjob.Container, Image: "mlkube/trainer:dev",
						Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: strings.Repeat("x", 400)}}}}}}
				if oneService {
					pod.Spec.Hostname, pod.Spec.Subdomain = name, jobName
					objs = append(objs, pod)
					continue
				}
				objs = append(objs, pod, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
					Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Port: 2222}}}})
			}
		}
	}
	return objs
}

// createdStatus is the status write that says a job's pods and services exist.
var createdStatus = []byte(`{"status":{"phase":"Running","state":"Running","replicas":"master 0/1 worker 0/5 ps 0/2",` +
	`"conditions":[{"type":"Created","status":"True","reason":"PodsCreated","message":"created 8 pods and their addresses","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)

type result struct {
	perJob                 map[string]float64 // apiserver requests per job, by verb and resource
	took                   time.Duration
	rssMiB, binaryMiB, cpu float64
	apiCPU                 float64
	benchCPU               float64 // the bench's own, reports included

	hold *held
}

// held is what the operator cost in the -hold after every job was Created.
type held struct {
	took                        time.Duration
	cpu, apiCPU, benchCPU       float64
	rssMiB                      float64 // the peak, over the whole run
	perJob                      map[string]float64
	statusWrites, createdWrites float64 // per job: in the hold, and on the way to Created
	reports                     string  // the reporter's summary, with -report
	reportEvery                 time.Duration
}

// runOptions are the operator run's flags.
type runOptions struct {
	report, hold time.Duration
}

// statusWrites are the successful status writes of TfJobs among requests, per job.
func statusWrites(perJob map[string]float64) float64 {
	return perJob["PATCH "+tfjob.Plural+"/status"] + perJob["PUT "+tfjob.Plural+"/status"]
}

// holdLines describe the hold, if there was one.
func (r result) holdLines(n int) []string {
	h := r.hold
	if h == nil {
		return nil
	}
	what := "no reports"
	if h.reportEvery > 0 {
		what = fmt.Sprintf("reports every %v", h.reportEvery)
	}
	lines := []string{fmt.Sprintf("N=%d, %s: in %.0f s, operator CPU %.1f s (%.2f cores), apiserver CPU %.1f s (%.2f cores), the bench's own CPU %.1f s "+
		"(%.1f s on the way to Created); status writes per job %.2f (%.2f a minute), %.2f on the way to Created; operator peak RSS %.0f MiB (%.0f at Created); "+
		"API requests per job in the hold: %s",
		n, what, h.took.Seconds(), h.cpu, h.cpu/h.took.Seconds(), h.apiCPU, h.apiCPU/h.took.Seconds(), h.benchCPU, r.benchCPU,
		h.statusWrites, h.statusWrites/h.took.Minutes(), h.createdWrites, h.rssMiB, r.rssMiB, describe(h.perJob))}
	if h.reports != "" {
		lines = append(lines, fmt.Sprintf("N=%d, %s", n, h.reports))
	}
	return lines
}

// startOperator runs the operator binary with default flags, and extra (-report's), against
// env's apiserver, after making the namespaces, and gives its caches time to sync. stop ends it.
func startOperator(bin string, env *envtest.Environment, c client.Client, extra []string, namespaces ...string) (op *exec.Cmd, logName string, stop func()) {
	kubeconfig := filepath.Join(os.TempDir(), "mlkube-bench.kubeconfig")
	check(os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	args := []string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"}
	// The defaults are what is measured; extra flags are for exploring the knobs.
	args = append(args, extra...)
	args = append(args, strings.Fields(os.Getenv("BENCH_OPERATOR_FLAGS"))...)
	op = exec.Command(bin, args...)
	logf, err := os.CreateTemp("", "mlkube-bench-operator-*.log")
	check(err)
	op.Stdout, op.Stderr = logf, logf
	check(op.Start())
	atExit(func() { _ = op.Process.Kill() })
	for _, ns := range namespaces {
		check(c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	time.Sleep(2 * time.Second) // the operator's caches sync
	// As in a cluster whose CRDs were installed before its jobs came: a job created within
	// admitted.Margin of its CRD's install is one the operator checks again in process
	// (operator/admitted), which no steady cluster's jobs are.
	time.Sleep(admitted.Margin + time.Second)
	return op, logf.Name(), func() {
		_ = op.Process.Kill()
		_ = op.Wait()
		os.Remove(logf.Name())
		os.Remove(kubeconfig)
	}
}

// runOperator runs the operator binary with default flags and times n jobs to Created; with
// o.report, its progress endpoint on 127.0.0.1 and the jobs reporting to it. Then it holds for
// o.hold and measures that too.
func runOperator(bin string, n int, o runOptions) result {
	env, cfg, c := start()
	defer env.Stop()
	var extra []string
	if o.report > 0 {
		extra = progressFlags
	}
	op, logName, stop := startOperator(bin, env, c, extra, "bench")
	defer stop()
	var rep *reporter
	if o.report > 0 {
		rep = newReporter(cfg, c, "bench", op.Process.Pid, o.report)
	}

	ctx := context.Background()
	api0, op0, self0 := apiserverCPU(), procCPU(op.Process.Pid), procCPU(os.Getpid())
	created := watchCreated(cfg, "bench", n)
	req0 := requests(cfg)
	stopProfile := profile(cfg, fmt.Sprintf("operator-%d", n))

	t0 := time.Now()
	if os.Getenv("BENCH_TRACE") != "" {
		stop := make(chan struct{})
		defer close(stop)
		go trace(stop, op.Process.Pid)
	}
	check(parallel(n, func(i int) error { return c.Create(ctx, job("bench", i)) }))
	if os.Getenv("BENCH_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "jobs created after %.1fs\n", time.Since(t0).Seconds())
	}
	// Watched, not polled: listing a thousand jobs five times a second would cost the apiserver
	// more than some of what is measured.
	deadline := time.After(30 * time.Minute)
	for done := 0; done < n; {
		select {
		case name := <-created:
			done++
			if rep != nil {
				rep.start(name)
			}
			if os.Getenv("BENCH_TRACE") != "" && done%100 == 0 {
				fmt.Fprintf(os.Stderr, "%.1fs: %d jobs Created\n", time.Since(t0).Seconds(), done)
			}
		case <-deadline:
			check(fmt.Errorf("only %d of %d jobs created after 30 minutes; operator log: %s", done, n, logName))
		}
	}
	took := time.Since(t0)
	stopProfile()
	peak, file := residentKiB(op.Process.Pid)
	r := result{took: took, rssMiB: peak / 1024, binaryMiB: file / 1024, cpu: procCPU(op.Process.Pid) - op0, apiCPU: apiserverCPU() - api0,
		benchCPU: procCPU(os.Getpid()) - self0}
	req1 := requests(cfg)
	r.perJob = perJobSince(req0, req1, n)

	if o.hold > 0 {
		api1, op1, self1, t1 := apiserverCPU(), procCPU(op.Process.Pid), procCPU(os.Getpid()), time.Now()
		if rep != nil {
			rep.markHold()
		}
		time.Sleep(o.hold)
		h := &held{took: time.Since(t1), cpu: procCPU(op.Process.Pid) - op1, apiCPU: apiserverCPU() - api1, benchCPU: procCPU(os.Getpid()) - self1}
		h.perJob = perJobSince(req1, requests(cfg), n)
		peak, _ := residentKiB(op.Process.Pid)
		h.rssMiB = peak / 1024
		h.statusWrites, h.createdWrites = statusWrites(h.perJob), statusWrites(r.perJob)
		if rep != nil {
			rep.stopAll()
			var jobs v1beta1.TfJobList
			check(c.List(ctx, &jobs, client.InNamespace("bench")))
			h.reports, h.reportEvery = rep.summary(jobs.Items), o.report
		}
		r.hold = h
	} else if rep != nil {
		rep.stopAll()
	}

	var pods corev1.PodList
	check(c.List(ctx, &pods, client.InNamespace("bench")))
	var svcs corev1.ServiceList
	check(c.List(ctx, &svcs, client.InNamespace("bench")))
	if len(pods.Items) != n*8 || len(svcs.Items) != n {
		check(fmt.Errorf("%d pods and %d services for %d jobs", len(pods.Items), len(svcs.Items), n))
	}
	return r
}

// perJobSince is the apiserver's requests from before to after, per job.
func perJobSince(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d / float64(n)
		}
	}
	return out
}

// watchCreated sends a job's name on the channel, once, for each job in namespace ns whose
// condition Created turns true.
func watchCreated(cfg *rest.Config, ns string, n int) <-chan string {
	out := make(chan string, n)
	var seen sync.Map
	watch(cfg, ns, &v1beta1.TfJob{}, func(obj any) {
		if j, ok := obj.(*v1beta1.TfJob); ok && meta.IsStatusConditionTrue(j.Status.Conditions, v1beta1.JobCreated) {
			if _, dup := seen.LoadOrStore(j.UID, true); !dup {
				out <- j.Name
			}
		}
	})
	return out
}

// watch calls see with every object of obj's kind in namespace ns as it is added or changed,
// from a cache of the bench's own, synced before watch returns.
func watch(cfg *rest.Config, ns string, obj client.Object, see func(obj any)) {
	c, err := cache.New(cfg, cache.Options{Scheme: operator.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	check(err)
	inf, err := c.GetInformer(context.Background(), obj)
	check(err)
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }})
	check(err)
	go func() { _ = c.Start(context.Background()) }()
	if !c.WaitForCacheSync(context.Background()) {
		check(fmt.Errorf("the bench's watch of %T in %s did not sync", obj, ns))
	}
}

// runFairness times one tenant's job behind another's backlog: n jobs created in namespace
// tenant-a, 16 at a time, then one in tenant-b, and the time from that job's create until the
// operator has created all its pods (seen through a watch), while tenant-a's are still being
// worked through. A first-come work queue would serve it after every job of tenant-a.
func runFairness(bin string, n int) {
	env, cfg, c := start()
	defer env.Stop()
	_, logName, stop := startOperator(bin, env, c, nil, "tenant-a", "tenant-b")
	defer stop()
	ctx := context.Background()
	created := watchCreated(cfg, "tenant-a", n)
	var aDone atomic.Int64
	aAll := make(chan struct{})
	go func() {
		for range n {
			<-created
			aDone.Add(1)
		}
		close(aAll)
	}()
	pods := make(chan struct{}, 8)
	var seen sync.Map
	watch(cfg, "tenant-b", &corev1.Pod{}, func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			if _, dup := seen.LoadOrStore(p.UID, true); !dup {
				pods <- struct{}{}
			}
		}
	})

	t0 := time.Now()
	check(parallel(n, func(i int) error { return c.Create(ctx, job("tenant-a", i)) }))
	aCreated := time.Since(t0)
	tb := time.Now()
	check(c.Create(ctx, job("tenant-b", 0)))
	deadline := time.After(30 * time.Minute)
	for got := 0; got < 8; got++ {
		select {
		case <-pods:
		case <-deadline:
			check(fmt.Errorf("tenant-b's job had %d of its 8 pods after 30 minutes; operator log: %s", got, logName))
		}
	}
	bTook, aDoneThen := time.Since(tb), aDone.Load()
	select {
	case <-aAll:
	case <-deadline:
		check(fmt.Errorf("only %d of tenant-a's %d jobs created after 30 minutes; operator log: %s", aDone.Load(), n, logName))
	}
	fmt.Printf("\nFairness: %d jobs created in tenant-a (in %.1fs), then one in tenant-b: tenant-b's job had its 8 pods %.2fs after its create, "+
		"when %d of tenant-a's jobs were Created; all of tenant-a's were %.1fs after their first create.\n",
		n, aCreated.Seconds(), bTook.Seconds(), aDoneThen, time.Since(t0).Seconds())
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

// trace prints, every second until stop, the cores the apiserver and the operator used in it.
func trace(stop <-chan struct{}, op int) {
	api, opc := apiserverCPU(), procCPU(op)
	for t := 1; ; t++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		a, o := apiserverCPU(), procCPU(op)
		fmt.Fprintf(os.Stderr, "%3ds: apiserver %.2f cores, operator %.2f\n", t, a-api, o-opc)
		api, opc = a, o
	}
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

// residentKiB is a process's peak resident set (VmHWM) and, of its resident set now, the pages
// mapped from files (RssFile): for the operator, its own binary's code and read-only data, which
// no cache or GC setting changes.
func residentKiB(pid int) (peak, file float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmHWM:":
			peak = v
		case "RssFile:":
			file = v
		}
	}
	return peak, file
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
