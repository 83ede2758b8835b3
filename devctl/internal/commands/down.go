package commands

import (
	"context"
	"io"
	"os"
	"path/filepath"

	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// DefaultName is the cluster name when none is given.
const DefaultName = "mlkube"

// Down deletes the cluster and the kubeconfig context kind wrote for it; no such cluster is not
// an error, only said.
func Down(ctx context.Context, name string, status io.Writer) error {
	r := steps.Runner{Out: status}
	return r.Run(ctx,
		steps.Step{Name: "Checking Docker", Run: func(ctx context.Context) error {
			engine, err := kindcluster.CheckDocker(ctx)
			if err != nil {
				return err
			}
			return steps.Done("Docker %s answers", engine.Version)
		}},
		steps.Step{Name: "Deleting cluster " + name, Run: func(context.Context) error {
			c := kindcluster.New(name, kindcmd.NewLogger())
			existed, err := c.Delete()
			if err != nil {
				return err
			}
			// A multi-node cluster's network configs (devctl up --workers) go with it.
			if dir, err := netDir(name); err == nil {
				_ = os.RemoveAll(filepath.Dir(dir))
			}
			if !existed {
				return steps.Done("No cluster %s to delete", name)
			}
			return steps.Done("Deleted cluster %s and kubeconfig context %s", name, c.Context())
		}},
	)
}
