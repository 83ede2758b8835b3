package commands

import (
	"context"
	"errors"
	"fmt"
	"os"

	kindprovider "sigs.k8s.io/kind/pkg/cluster"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/tui"
)

// DashboardOptions say which cluster devctl dashboard shows and how; all but Name are
// tfjob-tui's own flags.
type DashboardOptions struct {
	// Name, when set, is the kind cluster to show (devctl up --name NAME), reached through the
	// kubeconfig kind keeps for it, as devctl status reaches it, whatever the current context.
	// Empty: the cluster of the kubeconfig context, as devctl run and logs use.
	Name string
	// Kubeconfig and Context pick the cluster when Name is empty (tfjob-tui's defaults:
	// $KUBECONFIG, else ~/.kube/config; the current context).
	Kubeconfig, Context string
	Namespace           string
	AllNamespaces       bool
	NoColor             bool
}

// The dashboard itself and the kubeconfig of a kind cluster; tests replace them, since one
// needs a terminal and the other Docker.
var (
	runDashboard   = tui.Run
	kindKubeconfig = readKindKubeconfig
)

// Dashboard runs tfjob-tui in this process, in the terminal, until the user quits or ctx is
// done. With Name it shows that kind cluster through a copy of kind's kubeconfig for it, so
// that the top bar names its context (kind-NAME) like any other; the copy is removed when the
// dashboard ends.
func Dashboard(ctx context.Context, o DashboardOptions) error {
	if o.Name != "" && (o.Kubeconfig != "" || o.Context != "") {
		return UsageError(errors.New("--name shows the kind cluster of that name through kind's own kubeconfig; it does not go with --kubeconfig or --context (leave --name out to use those)"))
	}
	opts := tui.Options{
		Kubeconfig: o.Kubeconfig, Context: o.Context,
		Namespace: o.Namespace, AllNamespaces: o.AllNamespaces, NoColor: o.NoColor,
	}
	if o.Name != "" {
		raw, err := kindKubeconfig(ctx, o.Name)
		if err != nil {
			return err
		}
		path, err := writePrivate(raw)
		if err != nil {
			return err
		}
		defer os.Remove(path)
		// The file's current context is kind-NAME: tfjob-tui takes it, and its namespace.
		opts.Kubeconfig = path
	}
	return runDashboard(ctx, opts)
}

// readKindKubeconfig is the kubeconfig kind keeps for the cluster called name, once Docker
// answers and every node of the cluster runs; what is missing is said with what to do.
func readKindKubeconfig(ctx context.Context, name string) ([]byte, error) {
	if _, err := kindcluster.CheckDocker(ctx); err != nil {
		return nil, err
	}
	c := kindcluster.New(name, kindcmd.NewLogger())
	exists, err := c.Exists()
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("no cluster %[1]s: create it with `devctl up --name %[1]s`, or leave --name out to use the current kubeconfig context", name)
	}
	if err := c.CheckRunning(ctx); err != nil {
		return nil, err
	}
	raw, err := kindprovider.NewProvider(kindprovider.ProviderWithDocker()).KubeConfig(name, false)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig of cluster %s: %w", name, err)
	}
	return []byte(raw), nil
}

// writePrivate writes a kubeconfig to a new file only its owner can read: it holds the
// cluster's client key.
func writePrivate(kubeconfig []byte) (string, error) {
	f, err := os.CreateTemp("", "devctl-dashboard-*.kubeconfig")
	if err != nil {
		return "", err
	}
	_, err = f.Write(kubeconfig)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing the cluster's kubeconfig for the dashboard: %w", err)
	}
	return f.Name(), nil
}
