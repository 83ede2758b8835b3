// Command devctl gives a developer a local mlkube: a kind cluster running the operator built
// from the checkout's source (`devctl up`), a look at it (`devctl status`), and its removal
// (`devctl down`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/devctl/internal/commands"
)

func main() {
	// controller-runtime's client would otherwise warn that no logger was set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devctl",
		Short: "A local mlkube: a kind cluster running the operator built from this checkout",
		Long: `devctl runs mlkube on your machine. ` + "`devctl up`" + ` creates a kind cluster in Docker,
builds the operator's image from the source of this checkout (no Dockerfile, no registry), loads
it into the cluster and installs the operator; ` + "`devctl status`" + ` tells how the cluster, the
operator and your TfJobs are doing; ` + "`devctl down`" + ` deletes the cluster. Run it from inside the
checkout.`,
		Example: `  go run ./devctl/cmd/devctl up
  kubectl get tfjobs
  go run ./devctl/cmd/devctl status
  go run ./devctl/cmd/devctl down`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cmd.AddCommand(upCommand(), downCommand(), statusCommand())
	return cmd
}

func upCommand() *cobra.Command {
	opts := commands.UpOptions{Name: commands.DefaultName, Wait: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create the cluster (if needed) and install the operator built from source",
		Long: `Up makes sure a kind cluster runs the operator built from this checkout. It creates the
cluster from --config (default: clusters/kind.yaml of the checkout, else a single node without
kindnet), builds the operator image with go build and tags it by its digest, loads it into every
node, applies the CRDs, RBAC and Deployment with server-side apply, and waits until the operator
is available. Every step prints one line with its duration and is skipped when already done: on
an existing cluster with unchanged source, up only rebuilds from Go's cache and checks. It leaves
kubectl on the cluster's context (kind-<name>).`,
		Example: `  # a cluster named mlkube from clusters/kind.yaml, with a node image built locally
  devctl up --image mlkube/kind-node:v1.34.4

  # after changing the operator: rebuild, load and roll out only what changed
  devctl up`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Up(cmd.Context(), opts, cmd.ErrOrStderr(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", opts.Name, "name of the kind cluster")
	cmd.Flags().StringVar(&opts.Config, "config", "", "kind config file (default: clusters/kind.yaml of the checkout, else one node without kindnet)")
	cmd.Flags().StringVar(&opts.NodeImage, "image", "", "kind node image, overriding the config's")
	cmd.Flags().DurationVar(&opts.Wait, "wait", opts.Wait, "how long to wait for the control plane, then for the operator")
	return cmd
}

func downCommand() *cobra.Command {
	name := commands.DefaultName
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the cluster and its kubeconfig context",
		Long: `Down deletes the kind cluster (its node containers, with everything that ran in it) and
removes the kind-<name> context, cluster and user that kind wrote to your kubeconfig. When there
is no such cluster it says so and succeeds.`,
		Example: `  devctl down
  devctl down --name experiment`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Down(cmd.Context(), name, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "name of the kind cluster")
	return cmd
}

func statusCommand() *cobra.Command {
	name := commands.DefaultName
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's nodes, the operator, the TfJob CRD and TfJobs by state",
		Long: `Status reports on the cluster through the kubeconfig kind keeps for it, whatever your current
kubectl context is: whether each node is Ready, whether the operator Deployment is available and
which version and image it runs, whether the TfJob CRD is established, and how many TfJobs are in
each state across all namespaces. It fails only when it cannot look (no Docker, no cluster, no
API server); what it finds unhealthy it reports.`,
		Example: `  devctl status
  devctl status --name experiment`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Status(cmd.Context(), name, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "name of the kind cluster")
	return cmd
}
