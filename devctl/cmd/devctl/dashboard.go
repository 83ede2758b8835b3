package main

import (
	"github.com/spf13/cobra"

	"github.com/mlkube/mlkube/tui"
)

// dashboardCommand is tfjob-tui, reachable from devctl.
func dashboardCommand() *cobra.Command {
	var o tui.Options
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "A live terminal dashboard of jobs, replicas, logs and TensorBoard (tfjob-tui)",
		Long: `Dashboard opens tfjob-tui on the cluster of the current kubeconfig context (the one devctl up
set): every TfJob and MXJob with its state and ready/total replicas, a job's replicas with their
last exit, its conditions and events, a log pane that follows a replica, and the TensorBoard link
with a port-forward. It only reads; it never changes the cluster. Keys as in k9s: ? help,
/ filter, j/k, enter, esc, l logs, f follow, b port-forward, q quit.`,
		Example: `  devctl dashboard
  devctl dashboard -A            # every namespace
  devctl dashboard -n team-a --no-color`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return tui.Run(cmd.Context(), o) },
	}
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "namespace to show (default: the context's)")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "show the jobs of every namespace")
	cmd.Flags().StringVar(&o.Context, "context", "", "kubeconfig context (default: the current one)")
	cmd.Flags().BoolVar(&o.NoColor, "no-color", false, "draw without colours (NO_COLOR does the same)")
	return cmd
}
