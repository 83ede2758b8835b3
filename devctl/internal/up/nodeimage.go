package up

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mlkube/mlkube/devctl/internal/scripts"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// nodeImageScript builds the offline kind node image, cached in Docker's image store by its
// recipe; its stdout's last line is the image's tag, its stderr the progress.
const nodeImageScript = "clusters/nodeimage/build.sh"

// nodeImage is what the step that chooses the node image settles: whether the cluster exists
// (its nodes then keep their image, and nothing more is settled), else the image a new cluster's
// nodes run, and whether it is one kind publishes (published), whose pod network is kindnet.
type nodeImage struct {
	exists    bool
	ref       string
	published bool
}

// chooseNodeImage settles the node image of a cluster up is about to create. --image is taken
// as given. Without it, the image is ours: the offline node image this checkout builds (reused
// from Docker's image store when its recipe is unchanged). kind's own default is never taken in
// silence: it is another Kubernetes version, and its nodes lack the pod network our cluster
// configs expect.
func (u *up) chooseNodeImage(ctx context.Context) (nodeImage, string, error) {
	exists, err := u.cluster.Exists()
	if err != nil {
		return nodeImage{}, "", err
	}
	if exists {
		return nodeImage{exists: true}, fmt.Sprintf("Cluster %s exists: its nodes keep their image", u.opts.Name), nil
	}
	if ref := u.opts.NodeImage; ref != "" {
		if kindsOwn(ref) {
			return nodeImage{ref: ref, published: true}, fmt.Sprintf("Node image %s, as --image gives: kind's own, so a single node gets kind's pod network (kindnet)", ref), nil
		}
		return nodeImage{ref: ref}, fmt.Sprintf("Node image %s, as --image gives", ref), nil
	}
	published := publishedNodeImage()
	why, ok := havePublished(ctx, steps.From(ctx), published)
	if ok {
		chosen := nodeImage{ref: published, published: true}
		if published != publishedDefault {
			return chosen, fmt.Sprintf("Node image %s: standing in for kind's published image, as %s says (%s)", published, publishedEnv, why), nil
		}
		return chosen, fmt.Sprintf("Node image %s: kind's published image for Kubernetes %s (%s)", published, publishedVersion, why), nil
	}
	steps.From(ctx).Printf("not kind's published image %s: %s", published, why)
	tag, err := buildNodeImage(ctx, u.root, steps.From(ctx))
	if err != nil {
		return nodeImage{}, "", err
	}
	return nodeImage{ref: tag}, fmt.Sprintf("Node image %s: mlkube's offline image (no --image given), built from Go modules and kept in Docker's image store", tag), nil
}

// kind's published node image of our Kubernetes minor version, pinned by digest, as kind's
// release notes give it: kind v0.30.0's image of Kubernetes v1.34.0 (kind keeps working with the
// images of its earlier releases). Our offline image is v1.34.4 (hack/kubernetes/go.mod).
const (
	publishedVersion = "v1.34.0"
	publishedDefault = "kindest/node:" + publishedVersion + "@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a"
)

// kindsOwn says whether a node image is one kind publishes (kindest/node, by tag or digest,
// from any registry's copy): those carry kindnet, where clusters/kind.yaml, written for the
// offline image, leaves the pod network to the flannel that only the offline image has.
func kindsOwn(ref string) bool {
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name == "kindest/node" || strings.HasSuffix(name, "/kindest/node")
}

// publishedEnv names another reference for the published image, pinned by digest as well: a copy
// of it in a mirror or in the local registry. The end-to-end tests point it at one.
const publishedEnv = "MLKUBE_PUBLISHED_NODE_IMAGE"

// pullLimit bounds the pull of the published image: where it cannot be had in that time, the
// offline image is quicker to have (or already had).
const pullLimit = 3 * time.Minute

func publishedNodeImage() string {
	if ref := os.Getenv(publishedEnv); ref != "" {
		return ref
	}
	return publishedDefault
}

// havePublished makes sure Docker holds the published node image ref: it does already, or a pull
// of it ends within pullLimit. It says how, or why not.
func havePublished(ctx context.Context, p *steps.Progress, ref string) (string, bool) {
	if !strings.Contains(ref, "@sha256:") {
		return publishedEnv + " must name the image by digest (NAME@sha256:...)", false
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", ref).Run() == nil {
		return "in Docker's image store", true
	}
	task := p.Start(fmt.Sprintf("pulling %s (for at most %s)", ref, pullLimit))
	pctx, cancel := context.WithTimeout(ctx, pullLimit)
	defer cancel()
	err := scripts.Command(pctx, "docker", []string{"pull", ref}, task.Doing)
	switch {
	case pctx.Err() != nil && ctx.Err() == nil:
		task.Fail()
		return fmt.Sprintf("no pull within %s", pullLimit), false
	case err != nil:
		task.Fail()
		return "cannot pull it: " + lastLine(err.Error()), false
	}
	task.Done("pulled %s", ref)
	return "pulled", true
}

// lastLine is the last line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSpace(s[strings.LastIndex(s, "\n")+1:])
}

// buildNodeImage runs the node image's build script and returns the tag it built or found; its
// progress lines become the step's.
func buildNodeImage(ctx context.Context, root string, p *steps.Progress) (string, error) {
	task := p.Start("building or finding the offline node image (the first build takes 10-40 minutes on 2 cores)")
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
