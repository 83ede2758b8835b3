package kueue

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What jobframework reads and writes besides the jobs (whose update verb each framework's
// package grants, with patch: Kueue patches a job as it suspends and resumes it). Namespaces:
// Kueue reads their labels for a ClusterQueue's namespaceSelector.
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/finalizers,verbs=update
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=resourceflavors;workloadpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;update;patch

// AddToScheme adds Kueue's API types, which the integration reads and writes.
func AddToScheme(s *runtime.Scheme) error { return kueue.AddToScheme(s) }

// Setup runs Kueue's job integration for every kind in kinds under mgr: a controller per kind
// (named kueue-<kind>, beside the engine's own) that creates each queued job's Workload and
// suspends, admits and evicts the job as Kueue decides. Kueue itself (its manager, CRDs and
// queues) must run in the cluster, with these kinds among its externalFrameworks.
func Setup(ctx context.Context, mgr manager.Manager, kinds []*v1beta1.Kind) error {
	// Always on here: the PodsReady condition costs one status write when a job's pods are
	// ready, and Kueue ignores it unless its own config enables waitForPodsReady.
	podsReady := &configapi.WaitForPodsReady{Timeout: metav1.Duration{}}
	for _, k := range kinds {
		gvk := v1beta1.GroupVersion.WithKind(k.Name)
		if err := jobframework.SetupWorkloadOwnerIndex(ctx, mgr.GetFieldIndexer(), gvk); err != nil {
			return fmt.Errorf("indexing %s's Workloads: %w", k.Name, err)
		}
		named := func(b *builder.Builder, _ client.Client) *builder.Builder { return b.Named("kueue-" + k.Label()) }
		factory := jobframework.NewGenericReconcilerFactory(func() jobframework.GenericJob { return newJob(k) }, named)
		//nolint:staticcheck // jobframework records with client-go's EventRecorder.
		rec := mgr.GetEventRecorderFor("mlkube-kueue")
		r, err := factory(ctx, mgr.GetClient(), mgr.GetFieldIndexer(), rec,
			jobframework.WithWaitForPodsReady(podsReady),
			jobframework.WithManagerName("mlkube-operator"))
		if err != nil {
			return fmt.Errorf("Kueue's integration of %s: %w", k.Name, err)
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("Kueue's integration of %s: %w", k.Name, err)
		}
	}
	return nil
}
