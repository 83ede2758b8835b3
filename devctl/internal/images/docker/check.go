package docker

import (
	"context"
	"errors"
	"slices"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
)

// A Plan is what loading images of the local Docker engine into a cluster's pod nodes takes.
type Plan struct {
	// Local are the images asked about that the engine holds, with their image IDs.
	Local []Image
	// Load are those some pod node lacks, and Nodes the pod nodes that lack one or more.
	Load  []Image
	Nodes []nodes.Node
	// Lacking are, by node name, the images of Local each pod node lacks; Holding, those it
	// holds.
	Lacking, Holding map[string][]Image
	// PodNodes is how many nodes pods run on.
	PodNodes int
}

// Check finds which of refs the local Docker engine holds and which of those the cluster's pod
// nodes lack (CheckNodes). Refs the engine lacks are left to the cluster, which may pull them.
// Nothing in the engine costs one `docker image inspect`.
func Check(ctx context.Context, c *kindcluster.Cluster, refs []string) (*Plan, error) {
	local, err := InEngine(ctx, refs)
	if err != nil || len(local) == 0 {
		return &Plan{}, err
	}
	return CheckNodes(ctx, c, local)
}

// Glance is what devctl run waits for before it creates a job when devctl's memory knows the
// nodes (Memory.Covers): which of refs the engine holds, and the pod nodes' containers, from one
// docker command each, at once. The nodes are none of its business, and no error, when the
// engine holds none of refs.
func Glance(ctx context.Context, c *kindcluster.Cluster, refs []string) ([]Image, []kindcluster.NodeContainer, error) {
	var local []Image
	var pods []kindcluster.NodeContainer
	var engineErr, podsErr error
	var wg sync.WaitGroup
	wg.Go(func() { local, engineErr = InEngine(ctx, refs) })
	wg.Go(func() { pods, podsErr = c.PodNodeContainers(ctx) })
	wg.Wait()
	switch {
	case engineErr != nil:
		return nil, nil, engineErr
	case len(local) == 0:
		return nil, nil, nil
	case podsErr != nil:
		return nil, nil, podsErr
	}
	return local, pods, nil
}

// CheckNodes finds which of the engine's images local the cluster's pod nodes
// (kindcluster.PodNodes) lack: a node lacks an image when no tag of its name names the
// engine's image ID there. It lists every pod node at once, one `ctr images list` each.
func CheckNodes(ctx context.Context, c *kindcluster.Cluster, local []Image) (*Plan, error) {
	all, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	pods := kindcluster.PodNodes(all)
	lists := make([]map[string]string, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, n := range pods {
		wg.Go(func() { lists[i], errs[i] = kindcluster.NodeImages(n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p := &Plan{Local: local, PodNodes: len(pods), Lacking: map[string][]Image{}, Holding: map[string][]Image{}}
	for i, have := range lists {
		node := pods[i].String()
		for _, img := range local {
			if Holds(have, img) {
				p.Holding[node] = append(p.Holding[node], img)
				continue
			}
			p.Lacking[node] = append(p.Lacking[node], img)
			// Once per name: a job may spell one image two ways (my-trainer:v1,
			// docker.io/library/my-trainer:v1).
			if !slices.ContainsFunc(p.Load, func(l Image) bool { return l.Name == img.Name }) {
				p.Load = append(p.Load, img)
			}
		}
		if len(p.Lacking[node]) > 0 {
			p.Nodes = append(p.Nodes, pods[i])
		}
	}
	return p, nil
}

// Holds reports whether a node's image list (kindcluster.NodeImages) has img: its name names the
// same manifest as the reference containerd keeps under the image's ID.
func Holds(have map[string]string, img Image) bool {
	digest, ok := ours.Lookup(have, img.Name)
	return ok && digest == have[img.ID]
}
