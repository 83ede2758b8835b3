package main

import (
	"github.com/spf13/cobra"

	"github.com/mlkube/mlkube/devctl/internal/commands"
)

// dashboardCommand is tfjob-tui, reachable from devctl, run in devctl's own process.
func dashboardCommand() *cobra.Command {
	var o commands.DashboardOptions
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "A live terminal dashboard of jobs, replicas, logs and TensorBoard (tfjob-tui)",
		Long: `Dashboard opens tfjob-tui, the terminal dashboard, on the cluster of the current kubeconfig
context (the one devctl up set), or with --name on the kind cluster of that name whatever the
current context is. It shows every ` + kindsAnd + ` with its state, ready/total
replicas and restarts; enter on a job shows its replica pods with the exit code and reason of
each container's last termination and its restart count, the job's conditions and its events; l
follows a replica's log, p switches to the log of the container before its last restart. It
only reads; it never changes the cluster.

Keys as in k9s: j/k move, enter open, esc back, / filter, l logs, f follow, p previous log,
b TensorBoard port-forward, ? help, q quit. It is the same program as tfjob-tui (go build
./tui/cmd/tfjob-tui), with the same flags, plus --name; docs/tui.md has its screens and keys.`,
		Example: `  # the jobs of the current context's namespace (after devctl up: the mlkube kind cluster)
  devctl dashboard

  # the kind cluster made by devctl up --name multi, namespace team-a, whatever the context
  devctl dashboard --name multi -n team-a

  # every namespace, without colours
  devctl dashboard -A --no-color

  # another cluster of your kubeconfig
  devctl dashboard --context prod-east -n training`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return commands.Dashboard(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "", "show the kind cluster of this name (devctl up --name), through kind's kubeconfig for it (default: the current kubeconfig context's cluster)")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace to show (default: the context's, else default)")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "show the jobs of every namespace")
	f.StringVar(&o.Context, "context", "", "kubeconfig context (default: the current one); not with --name")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config); not with --name")
	f.BoolVar(&o.NoColor, "no-color", false, "draw without colours (NO_COLOR does the same)")
	return cmd
}
