package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// current is the cluster of the current kubeconfig context, the one kubectl uses (devctl up
// makes it the kind cluster's), for the commands that work on jobs: run and logs.
type current struct {
	// resources are the mlkube.io/v1beta1 resources the cluster serves: tfjobs, mxjobs.
	resources []metav1.APIResource
	// Context names the kubeconfig context; Namespace is its namespace, "default" when it sets
	// none.
	Context, Namespace string
	Config             *rest.Config
	Scheme             *runtime.Scheme
	Client             client.WithWatch
	Kube               kubernetes.Interface
}

// connectCurrent connects to the cluster of the current context and checks that it answers;
// serves says whether it serves a kind of job. The errors say what to do.
func connectCurrent(ctx context.Context) (*current, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if raw.CurrentContext == "" {
		return nil, errors.New("no current kubeconfig context: run `make up` first (devctl up makes its kind cluster the current context)")
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %s: %w", raw.CurrentContext, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "devctl"
	cfg.QPS, cfg.Burst = 50, 100

	probe := rest.CopyConfig(cfg)
	probe.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("no cluster answers at context %s (%s): run `make up` first", raw.CurrentContext, steps.OneLine(err))
	}
	var served []metav1.APIResource
	resources, err := dc.ServerResourcesForGroupVersion(v1beta1.GroupVersion.String())
	switch {
	case err == nil:
		served = resources.APIResources
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("asking the cluster at context %s about mlkube's jobs: %w", raw.CurrentContext, err)
	}

	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &current{Context: raw.CurrentContext, Namespace: ns, Config: cfg, Scheme: scheme, Client: cl, Kube: kube, resources: served}, nil
}

// serves says, as an error to show, when the cluster does not serve jobs of the kind.
func (c *current) serves(kind *v1beta1.Kind) error {
	for _, r := range c.resources {
		if r.Name == kind.Plural {
			return nil
		}
	}
	return fmt.Errorf("%s CRD not installed in the cluster at context %s: run devctl up", kind.Name, c.Context)
}
