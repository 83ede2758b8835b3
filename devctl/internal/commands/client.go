package commands

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What devctl installs and looks at in the cluster.
const (
	operatorNamespace  = "mlkube-system"
	operatorDeployment = "mlkube-operator"
	// operatorDevImage is the image the manifests name; devctl swaps in the image it built.
	operatorDevImage = "mlkube/operator:dev"
	// versionAnnotation on the operator Deployment records the version devctl built.
	versionAnnotation = "mlkube.io/version"
)

// clients talk to one kind cluster through the kubeconfig kind keeps for it.
type clients struct {
	client.Client
	kube kubernetes.Interface
}

func connect(c *kindcluster.Cluster) (*clients, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{Client: cl, kube: kube}, nil
}
