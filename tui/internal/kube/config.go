package kube

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Target is where the dashboard looks.
type Target struct {
	Context   string // the kubeconfig context; empty when given a rest.Config
	Server    string // the apiserver's URL
	Namespace string // empty: all namespaces
}

// Scope says which namespaces the target covers, for people.
func (t Target) Scope() string {
	if t.Namespace == "" {
		return "all namespaces"
	}
	return "namespace " + t.Namespace
}

// Load reads the kubeconfig (path, else $KUBECONFIG, else ~/.kube/config) and picks the
// context (kubeContext, else the current one) and the namespace (namespace, else the
// context's, else default; all namespaces when all is set).
func Load(path, kubeContext, namespace string, all bool) (*rest.Config, Target, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, Target{}, errors.New("no kubeconfig: found none at $KUBECONFIG or ~/.kube/config. " +
				"Point --kubeconfig or KUBECONFIG at your cluster's, or run `devctl up` for a local cluster")
		}
		return nil, Target{}, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, Target{}, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	t := Target{Context: raw.CurrentContext, Server: cfg.Host}
	if kubeContext != "" {
		t.Context = kubeContext
	}
	switch {
	case all:
	case namespace != "":
		t.Namespace = namespace
	default:
		ns, _, err := cc.Namespace()
		if err != nil || ns == "" {
			ns = "default"
		}
		t.Namespace = ns
	}
	return cfg, t, nil
}
