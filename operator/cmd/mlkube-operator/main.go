// Command mlkube-operator runs TfJobs: it creates each replica's pod and service, injects
// TF_CONFIG, restarts replicas by exit code and reports status.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// defaultMemoryLimit is the Go runtime's soft memory limit unless GOMEMLIMIT says otherwise.
// At N=1000 (make bench) the live heap peaks near 36 MB; 68 MiB keeps the peak RSS, with the
// binary's 34-35 MiB, within 100 MiB, at some 10% more operator CPU than 72 MiB (which peaked
// at 100-103 MiB); 64 MiB cost 1.2-1.4 times the CPU (docs/performance.md, "The operator at
// scale").
const defaultMemoryLimit = 68 << 20

// apiserverWait bounds how long the operator waits for the apiserver to answer before it
// starts (and fails, saying why, if it still does not).
const apiserverWait = time.Minute

func main() {
	var opts operator.Options
	var qps float64
	var burst int
	var showVersion bool
	flag.StringVar(&opts.Namespace, "namespace", "", "watch only this namespace (default: all namespaces)")
	flag.StringVar(&opts.AcceleratorConfig, "accelerator-config", "",
		"path of the accelerator config (host driver volumes and env vars per GPU resource, as nodeprobe publishes it); reloaded when it changes")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "jobs reconciled at once")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", true, "elect a leader so that only one of several replicas acts")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's own)")
	flag.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", operator.DefaultLeaseDuration,
		"how long a leader's lease lasts without renewal: a leader that dies without releasing it is replaced once it expires")
	flag.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", operator.DefaultRenewDeadline,
		"how long the leader keeps trying to renew before it gives up leading (and exits); less than the lease duration")
	flag.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", operator.DefaultRetryPeriod,
		"how often candidates try to take the lease and the leader renews it")
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 turns it off")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (e.g. 127.0.0.1:6060), for finding where the operator's time goes; 0 turns it off")
	flag.Float64Var(&qps, "kube-api-qps", -1, "client-side limit of requests per second to the apiserver; negative turns it off and leaves fairness to the apiserver's priority and fairness")
	flag.IntVar(&burst, "kube-api-burst", 1000, "burst above --kube-api-qps")
	flag.BoolVar(&opts.Kueue, "kueue", false,
		"run Kueue's job integration: a job labelled kueue.x-k8s.io/queue-name waits in that LocalQueue until Kueue admits it; Kueue must run in the cluster with mlkube's kinds among its externalFrameworks")
	flag.StringVar(&opts.ProgressBindAddress, "progress-bind-address", "0",
		"address of the HTTPS endpoint the trainers report their progress to, e.g. :8443 (docs/progress.md; the Deployment turns it on); 0 turns it off, and replicas are then not told where to report")
	flag.StringVar(&opts.ProgressURL, "progress-url", "https://mlkube-progress."+ownNamespace()+".svc:443",
		"where the trainers reach that endpoint: the Service in front of the operator; its certificate is issued for this URL's host")
	flag.BoolVar(&showVersion, "version", false, "print the version and exit")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: mlkube-operator [flags]\n\nRuns the mlkube operator (%s) against the cluster of --kubeconfig, $KUBECONFIG,\nthe in-cluster config or ~/.kube/config, in that order.\n\nFlags:\n", v1beta1.KindNames("and"))
		flag.PrintDefaults()
	}
	flag.Parse()
	if showVersion {
		fmt.Println(operator.Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		// The caches hold what the operator owns, trimmed; what grows with load is garbage
		// from decoding watch events. A soft limit makes the collector return it before the
		// heap doubles, keeping a thousand jobs near 100 MiB. GOMEMLIMIT overrides it.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "no cluster to talk to: set --kubeconfig or KUBECONFIG, or run in a pod")
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.UserAgent = "mlkube-operator/" + operator.Version

	waitForAPIServer(cfg, log)
	mgr, err := operator.New(cfg, opts)
	if err != nil {
		log.Error(err, "cannot start the operator")
		os.Exit(1)
	}
	log.Info("starting", "version", operator.Version, "namespace", opts.Namespace, "acceleratorConfig", opts.AcceleratorConfig)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

// waitForAPIServer waits until the apiserver answers, for at most apiserverWait. On a new node
// the operator can start before kube-proxy routes the kubernetes service address (in kind, for
// a second or two, something else answered there); exiting then would cost the kubelet's
// restart back-off, 10 s and more, where a retry costs a second.
func waitForAPIServer(cfg *rest.Config, log logr.Logger) {
	c := rest.CopyConfig(cfg)
	c.Timeout = 5 * time.Second // an address that swallows requests fails too
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return // operator.New reports it
	}
	deadline := time.Now().Add(apiserverWait)
	for {
		_, err := dc.ServerVersion()
		if err == nil || time.Now().After(deadline) {
			return
		}
		log.Info("waiting for the apiserver", "error", err.Error())
		time.Sleep(time.Second)
	}
}

// ownNamespace is the operator's namespace, as its Deployment tells it (POD_NAMESPACE), or
// mlkube-system.
func ownNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "mlkube-system"
}
