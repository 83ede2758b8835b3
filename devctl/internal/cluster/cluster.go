// Package cluster is how devctl talks to a kind cluster's API (Connect), and the names of what
// it installs there, which devctl up installs and devctl status and version look at: the
// operator, and nodeprobe with the accelerator config it fills (docs/nodeprobe.md). The
// cluster's containers and nodes are package kindcluster's.
package cluster

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// DefaultName is the cluster name when none is given.
const DefaultName = "mlkube"

// What devctl installs of the operator.
const (
	OperatorNamespace  = "mlkube-system"
	OperatorDeployment = "mlkube-operator"
	// OperatorContainer is the operator's container in its Deployment.
	OperatorContainer = "operator"
	// OperatorDevImage is the image the manifests name; devctl swaps in the image it built.
	OperatorDevImage = "mlkube/operator:dev"
	// VersionAnnotation on the operator Deployment and the nodeprobe DaemonSet records the
	// version devctl built.
	VersionAnnotation = "mlkube.io/version"
	// AcceleratorConfigMap in the operator's namespace holds the accelerator config, under
	// AcceleratorKey; the operator's manifests create it, nodeprobe fills it.
	AcceleratorConfigMap = "mlkube-accelerators"
	AcceleratorKey       = "accelerators.yaml"
)

// What devctl installs of nodeprobe.
const (
	NodeprobeNamespace = "mlkube-nodeprobe"
	NodeprobeDaemonSet = "nodeprobe"
	// NodeprobeDevImage is the image nodeprobe's manifests name; devctl swaps in the one it built.
	NodeprobeDevImage = "mlkube/nodeprobe:dev"
)

// Clients talk to one kind cluster through the kubeconfig kind keeps for it.
type Clients struct {
	client.Client
	Kube kubernetes.Interface
}

// Scheme knows what devctl reads and writes: Kubernetes' own types, CRDs and every job kind.
func Scheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// Connect makes the clients of kind cluster c, with a scheme that knows our kinds and CRDs.
func Connect(c *kindcluster.Cluster) (*Clients, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Client: cl, Kube: kube}, nil
}
