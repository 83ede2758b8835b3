// Package operator assembles the mlkube operator: a controller-runtime manager running the
// replica-job engine for every framework, with the accelerator config, leader election, metrics
// and health probes. cmd/mlkube-operator is its command line; the tests start it the same way.
package operator

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mlkube/mlkube/operator/accelerator"
	"github.com/mlkube/mlkube/operator/admitted"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/fairqueue"
	"github.com/mlkube/mlkube/operator/jaxjob"
	"github.com/mlkube/mlkube/operator/kueue"
	"github.com/mlkube/mlkube/operator/mxjob"
	"github.com/mlkube/mlkube/operator/progress"
	"github.com/mlkube/mlkube/operator/pytorchjob"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// Version is set at build time (make build).
var Version = "dev"

// Frameworks are the job kinds the operator runs, each a plug-in to the one engine.
var Frameworks = []replicajob.Framework{tfjob.Framework{}, mxjob.Framework{}, pytorchjob.Framework{}, jaxjob.Framework{}}

// Options are the operator's settings; cmd/mlkube-operator maps its flags onto them.
type Options struct {
	// Namespace, when set, is the only namespace the operator watches.
	Namespace string
	// AcceleratorConfig is the path of the accelerator config file; empty means none.
	AcceleratorConfig string
	// MaxConcurrentReconciles is how many jobs are reconciled at once.
	MaxConcurrentReconciles int

	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election; zero takes
	// DefaultLeaseDuration and its companions.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	MetricsBindAddress                        string
	HealthProbeBindAddress                    string
	// PprofBindAddress serves Go's /debug/pprof for profiling the operator; empty or "0" is off.
	PprofBindAddress string

	// Kueue runs Kueue's job integration (operator/kueue) for every kind: Kueue (its CRDs,
	// manager and queues) must run in the cluster, with mlkube's kinds among its
	// externalFrameworks.
	Kueue bool

	// ProgressBindAddress is where the progress endpoint listens for the trainers' reports
	// (operator/progress, docs/progress.md); empty or "0" turns it off.
	ProgressBindAddress string
	// ProgressURL is where trainers reach that endpoint, e.g.
	// https://mlkube-progress.mlkube-system.svc:443: the replicas are told it, and the
	// endpoint's certificate is issued for its host.
	ProgressURL string
	// ProgressListening, when set, gets the endpoint's address once it listens (tests).
	ProgressListening func(net.Addr)

	// ManyPerProcess lets one process run several operators (tests do); controller-runtime
	// otherwise refuses a second controller of the same name because their metrics would clash.
	ManyPerProcess bool
}

// The leader election's defaults. A leader that dies without releasing its lease (SIGKILL, a
// lost node) is replaced once the lease expires, as a follower sees it at its next try: within
// LeaseDuration and two jittered RetryPeriods (up to 2.2 s each), 12.4 s at worst. client-go's
// usual 15 s lease and 2 s retry would make that up to 24 s. A renewal a second is one small
// write, nothing to an apiserver.
const (
	DefaultLeaseDuration = 8 * time.Second
	DefaultRenewDeadline = 6 * time.Second
	DefaultRetryPeriod   = 1 * time.Second
)

// Scheme knows every type the operator reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(s))
	must(v1beta1.AddToScheme(s))
	must(kueue.AddToScheme(s))
	must(apiextensionsv1.AddToScheme(s)) // the CRDs, read whole only when one changes (operator/admitted)
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// New builds the operator's manager; Start runs it.
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	if opts.LeaderElectionID == "" {
		opts.LeaderElectionID = "mlkube-operator.mlkube.io"
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 8
	}
	orDefault := func(d *time.Duration, def time.Duration) *time.Duration {
		if *d <= 0 {
			*d = def
		}
		return d
	}
	mopts := manager.Options{
		Scheme:                        Scheme(),
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 orDefault(&opts.LeaseDuration, DefaultLeaseDuration),
		RenewDeadline:                 orDefault(&opts.RenewDeadline, DefaultRenewDeadline),
		RetryPeriod:                   orDefault(&opts.RetryPeriod, DefaultRetryPeriod),
		// Also for the controllers Kueue's integration builds, which take no options from us.
		Controller: ctrlconfig.Controller{SkipNameValidation: &opts.ManyPerProcess},
	}
	mopts.Cache = trimmedCache()
	if opts.Namespace != "" {
		mopts.Cache.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	mgr, err := manager.New(cfg, mopts)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}

	deps := engineDeps{}
	if deps.pods, err = acceleratorPods(mgr, opts); err != nil {
		return nil, err
	}
	if deps.progress, deps.pokes, err = serveProgress(mgr, opts); err != nil {
		return nil, err
	}
	if err := indexOwners(mgr); err != nil {
		return nil, err
	}
	if deps.queue, err = queueOf(mgr, opts); err != nil {
		return nil, err
	}
	if deps.checker, err = admittedChecker(cfg, mgr, opts); err != nil {
		return nil, err
	}
	for _, fw := range Frameworks {
		if err := addEngine(mgr, opts, fw, deps); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// engineDeps are what every framework's engine shares.
type engineDeps struct {
	pods     replicajob.PodMutator
	queue    replicajob.Queue
	checker  *admitted.Checker
	progress *progress.Endpoint
	pokes    map[string]chan event.GenericEvent
}

// acceleratorPods is the accelerator config's store, which mounts the host's GPU driver into
// the pods that ask for a GPU; nil without --accelerator-config.
func acceleratorPods(mgr manager.Manager, opts Options) (replicajob.PodMutator, error) {
	if opts.AcceleratorConfig == "" {
		return nil, nil
	}
	store, err := accelerator.NewStore(opts.AcceleratorConfig, log.Log.WithName("accelerator"))
	if err != nil {
		return nil, fmt.Errorf("--accelerator-config: %w", err)
	}
	return store, mgr.Add(store)
}

// indexOwners indexes by owner the pods, services and the frameworks' extra objects.
func indexOwners(mgr manager.Manager) error {
	var extraTypes []client.Object
	for _, fw := range Frameworks {
		if ext, ok := fw.(replicajob.Extension); ok {
			extraTypes = append(extraTypes, ext.ExtraTypes()...)
		}
	}
	return replicajob.IndexOwners(context.Background(), mgr, extraTypes...)
}

// queueOf is Kueue's integration with --kueue; nil without.
func queueOf(mgr manager.Manager, opts Options) (replicajob.Queue, error) {
	if !opts.Kueue {
		return nil, nil
	}
	if err := kueue.Setup(context.Background(), mgr, v1beta1.Kinds); err != nil {
		return nil, fmt.Errorf("--kueue: %w", err)
	}
	return kueue.Waits{Reader: mgr.GetClient()}, nil
}

// admittedChecker says which jobs the apiserver already checked against the operator's own
// CRDs, so they are not checked again. Watching one namespace, the operator may read no CRD
// (its Role is namespaced): it then checks every job, as it does until the CRDs' first list is in.
func admittedChecker(cfg *rest.Config, mgr manager.Manager, opts Options) (*admitted.Checker, error) {
	if opts.Namespace != "" {
		return nil, nil
	}
	checker := &admitted.Checker{Reader: mgr.GetAPIReader()}
	return checker, mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return checker.Run(ctx, cfg) }))
}

// addEngine sets up the engine's controller for one framework.
func addEngine(mgr manager.Manager, opts Options, fw replicajob.Framework, deps engineDeps) error {
	r := &replicajob.Reconciler{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetAPIReader(),
		Framework: fw,
		Recorder:  mgr.GetEventRecorder("mlkube-operator"),
		Pods:      deps.pods,
		Queue:     deps.queue,
	}
	if deps.progress != nil {
		r.Progress, r.Pokes = deps.progress, deps.pokes[fw.Kind().Name]
	}
	if deps.checker != nil {
		r.Admitted = deps.checker
	}
	copts := controller.Options{
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		SkipNameValidation:      &opts.ManyPerProcess,
		// Round robin across namespaces: one tenant's burst of jobs does not hold up
		// another's (fairqueue's package comment says why not controller-runtime's queue).
		NewQueue: fairqueue.New,
	}
	if err := r.SetupWithManager(mgr, copts); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", fw.Kind().Name, err)
	}
	return nil
}

// trimmedCache keeps in memory only what the operator owns and only the fields it reads: pods
// and services of jobs (by label), without their specs, the jobs' Deployments (TensorBoard),
// and nothing's managedFields. A cluster's
// other pods never reach the operator, and a thousand jobs' pods cost little.
func trimmedCache() cache.Options {
	owned := labels.SelectorFromSet(nil)
	if req, err := labels.NewRequirement(v1beta1.LabelJobName, selection.Exists, nil); err == nil {
		owned = owned.Add(*req)
	}
	byObject := map[client.Object]cache.ByObject{
		&corev1.Pod{}:     {Label: owned, Transform: stripPodSpec},
		&corev1.Service{}: {Label: owned, Transform: stripServiceSpec},
		// TensorBoard's; without the selector every Deployment of the cluster is cached.
		&appsv1.Deployment{}: {Label: owned},
	}
	for _, k := range v1beta1.Kinds {
		byObject[k.New()] = cache.ByObject{Transform: stripLastApplied}
	}
	// Of ConfigMaps, only the namespaces' copies of the progress endpoint's CA.
	byObject[&corev1.ConfigMap{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", progress.TrustConfigMap)}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject}
}

// stripLastApplied drops what `kubectl apply` keeps in a job's annotations: a second copy of the
// whole job, as JSON, which would double each applied job in memory. The engine reads no job
// annotation and writes only the status, so nothing it sends can drop the annotation.
func stripLastApplied(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			delete(a, corev1.LastAppliedConfigAnnotation)
			if len(a) == 0 {
				o.SetAnnotations(nil)
			}
		}
	}
	return obj, nil
}

// stripPodSpec drops what the engine never reads from a cached pod: it judges replicas by
// their status, and finds them by name, labels and owner.
func stripPodSpec(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
		pod.Annotations = nil
		pod.Spec = corev1.PodSpec{NodeName: intern(pod.Spec.NodeName)}
		internMeta(&pod.ObjectMeta)
		st := &pod.Status
		st.Phase, st.QOSClass, st.Reason = corev1.PodPhase(intern(string(st.Phase))), corev1.PodQOSClass(intern(string(st.QOSClass))), intern(st.Reason)
		for i := range st.Conditions {
			c := &st.Conditions[i]
			c.Type, c.Status, c.Reason = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
		}
		for _, statuses := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
			for i := range statuses {
				c := &statuses[i]
				c.Name, c.Image = intern(c.Name), intern(c.Image)
			}
		}
	}
	return obj, nil
}

func stripServiceSpec(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		svc.ManagedFields = nil
		svc.Spec = corev1.ServiceSpec{}
		internMeta(&svc.ObjectMeta)
	}
	return obj, nil
}

// internMeta makes the strings a cached object shares with others the same strings: its
// namespace, its labels (the same four keys on every replica, the job's name and the replica
// type as values) and its owner (a job's name and UID, on each of its nine objects). A watch
// decodes each into its own copy; a thousand jobs' pods and services held 2 MB of such copies.
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	for k, v := range m.Labels {
		m.Labels[intern(k)] = intern(v) // the key is replaced too: string keys are
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name, r.UID = intern(r.APIVersion), intern(r.Kind), intern(r.Name), types.UID(intern(string(r.UID)))
	}
}

// intern is s's canonical copy, held for as long as something refers to it.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// serveProgress sets up the progress endpoint (operator/progress): its server, on every replica
// of the operator, and what the engine reads of it. It returns, per kind, the channel on which
// the board asks for a job to be reconciled; nothing when the endpoint is off.
func serveProgress(mgr manager.Manager, opts Options) (*progress.Endpoint, map[string]chan event.GenericEvent, error) {
	if opts.ProgressBindAddress == "" || opts.ProgressBindAddress == "0" {
		return nil, nil, nil
	}
	u, err := url.Parse(opts.ProgressURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, nil, fmt.Errorf("--progress-url %q: an https URL, e.g. https://mlkube-progress.mlkube-system.svc:443", opts.ProgressURL)
	}
	names := []string{u.Hostname()}
	if strings.HasSuffix(u.Hostname(), ".svc") {
		names = append(names, u.Hostname()+".cluster.local")
	}
	pokes := map[string]chan event.GenericEvent{}
	for _, k := range v1beta1.Kinds {
		pokes[k.Name] = make(chan event.GenericEvent, 1024)
	}
	board := &progress.Board{Poke: func(job progress.JobRef, after time.Duration) {
		obj := job.Kind.New()
		obj.SetNamespace(job.Namespace)
		obj.SetName(job.Name)
		time.AfterFunc(after, func() { pokes[job.Kind.Name] <- event.GenericEvent{Object: obj} })
	}}
	certs := &progress.Certs{Names: names}
	handler := &progress.Handler{
		Board:    board,
		Reviewer: &progress.Reviewer{Client: mgr.GetClient()},
		Pods:     mgr.GetClient(),
		Ready:    func() bool { return elected(mgr) },
	}
	server := &progress.Server{Addr: opts.ProgressBindAddress, Handler: handler, Certs: certs, Listening: opts.ProgressListening}
	if err := mgr.Add(server); err != nil {
		return nil, nil, err
	}
	trust := &progress.Trust{Certs: certs, Client: mgr.GetClient()}
	return &progress.Endpoint{URL: strings.TrimSuffix(opts.ProgressURL, "/"), Board: board, Trust: trust}, pokes, nil
}

func elected(mgr manager.Manager) bool {
	select {
	case <-mgr.Elected():
		return true
	default:
		return false
	}
}
