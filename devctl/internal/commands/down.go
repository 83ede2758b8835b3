package commands

import (
	"context"
	"fmt"
	"io"
	"os"

	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/registry"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// Down deletes the cluster and the kubeconfig context kind wrote for it; no such cluster is not
// an error, only said. The local registry serves every cluster and keeps its images for the next
// one; with withRegistry it goes too, its images with it. Either way Down says what it did.
func Down(ctx context.Context, name string, withRegistry bool, status io.Writer) error {
	r := steps.Runner{Out: status}
	return r.Run(ctx,
		steps.Step{Name: "Checking Docker", Run: func(ctx context.Context) (string, error) {
			engine, err := kindcluster.CheckDocker(ctx)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Docker %s answers", engine.Version), nil
		}},
		steps.Step{Name: "Deleting cluster " + name, Run: func(context.Context) (string, error) {
			c := kindcluster.New(name, kindcmd.NewLogger())
			existed, err := c.Delete()
			if err != nil {
				return "", err
			}
			// A multi-node cluster's network configs (devctl up --workers) go with it.
			if dir, err := cache.ClusterDir(name); err == nil {
				_ = os.RemoveAll(dir)
			}
			if !existed {
				return fmt.Sprintf("No cluster %s to delete", name), nil
			}
			return fmt.Sprintf("Deleted cluster %s and kubeconfig context %s", name, c.Context()), nil
		}},
		steps.Step{Name: "The local registry " + registry.Host, Run: func(ctx context.Context) (string, error) {
			if withRegistry {
				container, volume, err := registry.Remove(ctx, true)
				switch {
				case err != nil:
					return "", err
				case !container && !volume:
					return "No local registry to delete", nil
				}
				return fmt.Sprintf("Deleted the local registry %s: its container %s and its images (volume %s)", registry.Host, registry.Container, registry.Volume), nil
			}
			r, err := registry.Look(ctx)
			switch {
			case err != nil:
				return "", err
			case !r.Exists:
				return "No local registry (devctl up runs one)", nil
			case r.Repositories == nil:
				return fmt.Sprintf("Kept the local registry %s and its images, for other clusters and the next devctl up (devctl down --registry deletes them)", registry.Host), nil
			}
			return fmt.Sprintf("Kept the local registry %s and its %s, for other clusters and the next devctl up (devctl down --registry deletes them)", registry.Host, registry.CountRepositories(len(r.Repositories))), nil
		}},
	)
}
