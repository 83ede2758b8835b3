package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/mlkube/mlkube/devctl/internal/scripts"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// nodeImageScript builds the offline kind node image, cached in Docker's image store by its
// recipe; its stdout's last line is the image's tag, its stderr the progress.
const nodeImageScript = "clusters/nodeimage/build.sh"

// chooseNodeImage settles the node image of a cluster up is about to create. --image is taken
// as given. Without it, the image is ours: the offline node image this checkout builds (reused
// from Docker's image store when its recipe is unchanged). kind's own default is never taken in
// silence: it is another Kubernetes version, and its nodes lack the pod network our cluster
// configs expect.
func (u *up) chooseNodeImage(ctx context.Context) error {
	exists, err := u.cluster.Exists()
	if err != nil {
		return err
	}
	if exists {
		return steps.Done("Cluster %s exists: its nodes keep their image", u.opts.Name)
	}
	if u.opts.NodeImage != "" {
		return steps.Done("Node image %s, as --image gives", u.opts.NodeImage)
	}
	tag, err := buildNodeImage(ctx, u.root, steps.From(ctx))
	if err != nil {
		return err
	}
	u.opts.NodeImage = tag
	return steps.Done("Node image %s: mlkube's offline image (no --image given), built from Go modules and kept in Docker's image store", tag)
}

// buildNodeImage runs the node image's build script and returns the tag it built or found; its
// progress lines become the step's.
func buildNodeImage(ctx context.Context, root string, p *steps.Progress) (string, error) {
	task := p.Start("building or finding the offline node image (the first build takes 20-40 minutes on 2 cores)")
	tag, err := scripts.Run(ctx, root, nodeImageScript, nil, func(line string) {
		task.Doing(line)
		if strings.HasPrefix(line, "== ") {
			p.Printf("%s", strings.TrimPrefix(line, "== "))
		}
	})
	if err != nil {
		task.Fail()
		return "", fmt.Errorf("%w\ngive a node image with --image to skip the build", err)
	}
	task.Done("node image %s", tag)
	return tag, nil
}
