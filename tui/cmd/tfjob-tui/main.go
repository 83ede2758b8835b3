// Command tfjob-tui is a live terminal dashboard of mlkube's jobs, their replicas, logs and
// TensorBoard. It only reads from the cluster. See docs/tui.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui"
)

func main() {
	var o tui.Options
	fs := pflag.NewFlagSet("tfjob-tui", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "tfjob-tui: a live dashboard of jobs (%s), read-only. Keys: ? in the dashboard.\n\nUsage: tfjob-tui [flags]\n\n%s", v1beta1.KindNames("and"), fs.FlagUsages())
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context (default the current one)")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "namespace (default the context's, else default)")
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "show the jobs of every namespace")
	fs.BoolVar(&o.NoColor, "no-color", false, "no colours (also when NO_COLOR is set)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "tfjob-tui: unexpected argument %q\n", fs.Arg(0))
		os.Exit(2)
	}
	if err := tui.Run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "tfjob-tui: %v\n", err)
		os.Exit(1)
	}
}
