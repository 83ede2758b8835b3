package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/images/load"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// nodeImages are the pod nodes of a cluster and, for each, the images it holds (reference →
// digest).
type nodeImages struct {
	nodes []nodes.Node
	have  []map[string]string
}

// buildImages builds the images of version for arch whose sources changed since the nodes got
// them: an image whose key (the hash of its sources, build flags and toolchain) gave an image
// that every node holds is not built again. For a new cluster, early has the builds started
// while it was created, which are reported instead (built again where one failed), and the nodes
// are not listed: they held none of our images. It returns the images and, when it listed them,
// the nodes' images.
func (u *up) buildImages(ctx context.Context, version, arch string, early map[string]*steps.Background[earlyBuild]) ([]*ours.Built, *nodeImages, string, error) {
	p := steps.From(ctx)
	opts := ours.Options{Dir: u.root, Version: version, Arch: arch}
	// The nodes' images are listed while the keys are computed.
	listed := make(chan struct{})
	var onNodes *nodeImages
	var listErr error
	go func() {
		defer close(listed)
		if early == nil {
			onNodes, listErr = listNodeImages(u.cluster)
		}
	}()
	kept := imageCache(p)
	// At once: after a change, each build is mostly its link, one core each, and nodeprobe's
	// (cgo, through the C linker) is the longest.
	got := make([]*ours.Built, len(ours.All))
	origins := make([]origin, len(ours.All))
	errs := make([]error, len(ours.All))
	var wg sync.WaitGroup
	for i, img := range ours.All {
		wg.Go(func() {
			got[i], origins[i], errs[i] = u.buildImage(ctx, p, kept, opts, img, early[img.Name], func() *nodeImages { <-listed; return onNodes })
		})
	}
	wg.Wait()
	<-listed
	if err := errors.Join(append(errs, listErr)...); err != nil {
		return nil, nil, "", err
	}
	byOrigin := map[origin][]string{}
	for i, b := range got {
		byOrigin[origins[i]] = append(byOrigin[origins[i]], b.Ref.String())
	}
	if len(byOrigin) == 1 && byOrigin[unchanged] != nil {
		return got, onNodes, fmt.Sprintf("Images unchanged, already on the nodes: %s (version %s)", strings.Join(byOrigin[unchanged], ", "), version), nil
	}
	var parts []string
	for _, o := range []origin{built, fromCache, unchanged} {
		if refs := byOrigin[o]; refs != nil {
			parts = append(parts, string(o)+" "+strings.Join(refs, ", "))
		}
	}
	parts[0] = strings.ToUpper(parts[0][:1]) + parts[0][1:]
	return got, onNodes, fmt.Sprintf("%s (version %s)", strings.Join(parts, "; "), version), nil
}

// origin is where an image of this run comes from.
type origin string

const (
	built     origin = "built"
	fromCache origin = "taken from the cache"
	unchanged origin = "unchanged"
)

// imageCache is where built images are remembered, by key; without a cache directory, nothing is.
func imageCache(p *steps.Progress) ours.Cache {
	dir, err := cache.Dir()
	if err != nil {
		if p != nil {
			p.Printf("building every image: no cache directory (%v)", err)
		}
		return ours.Cache{}
	}
	return ours.Cache{Dir: filepath.Join(dir, "images")}
}

// buildImage returns img's image and where it comes from: the early build (of the sources as
// they were when up started), an earlier build of the same key that the nodes hold already
// (unchanged: then there is no build), one the cache kept, or a build. listed gives the nodes'
// images once they are listed (nil when they are not).
func (u *up) buildImage(ctx context.Context, p *steps.Progress, kept ours.Cache, opts ours.Options, img ours.Image, early *steps.Background[earlyBuild], listed func() *nodeImages) (*ours.Built, origin, error) {
	if early != nil {
		task := p.Start("building " + img.Name)
		if e, err := early.Wait(task); err == nil {
			if e.cached {
				task.Done("took %s from the cache while the cluster was created", e.b.Ref)
				return e.b, fromCache, nil
			}
			task.Done("built %s while the cluster was created", e.b.Ref)
			if e.stable {
				remember(p, kept, e.key, e.b)
			}
			return e.b, built, nil
		}
		// Built again below, of the sources as they are now.
	}
	key, keyErr := ours.Key(ctx, opts, img)
	switch {
	case keyErr != nil:
		p.Printf("cannot hash the sources of %s, building it: %s", img.Name, steps.OneLine(keyErr))
	case kept.Dir != "":
		if ref, ok := kept.Lookup(img, key); ok {
			b := &ours.Built{Image: img, Ref: ref}
			if listed().onEvery(b) {
				return b, unchanged, nil
			}
		}
		if b, ok := kept.LoadImage(img, key); ok {
			task := p.Start("building " + img.Name)
			task.Done("took %s from the cache", b.Ref)
			return b, fromCache, nil
		}
	}
	task := p.Start("building " + img.Name)
	opts.Progress = task.Doing
	b, err := ours.Build(ctx, opts, img)
	if err != nil {
		task.Fail()
		return nil, built, err
	}
	task.Done("built %s", b.Ref)
	if keyErr == nil {
		// Remembered only when the sources did not change during the build: else the image may
		// be of other sources than the key's.
		if after, err := ours.Key(ctx, opts, img); err == nil && after == key {
			remember(p, kept, key, b)
		}
	}
	return b, built, nil
}

// remember records that key gave b, and keeps b, so that the next cluster needs no build.
func remember(p *steps.Progress, kept ours.Cache, key string, b *ours.Built) {
	if kept.Dir == "" {
		return
	}
	if err := errors.Join(kept.Store(key, b.Ref), kept.StoreImage(key, b)); err != nil {
		p.Printf("not remembering the build of %s: %v", b.Ref, err)
	}
}

// listNodeImages finds the pod nodes of c and the images each holds.
func listNodeImages(c *kindcluster.Cluster) (*nodeImages, error) {
	all, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	all = kindcluster.PodNodes(all)
	l := &nodeImages{nodes: all, have: make([]map[string]string, len(all))}
	for i, n := range all {
		if l.have[i], err = kindcluster.NodeImages(n); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// onEvery reports whether every node holds b under its content tag, with the :dev alias on the
// same image; false when the nodes were not listed.
func (l *nodeImages) onEvery(b *ours.Built) bool {
	if l == nil {
		return false
	}
	for _, have := range l.have {
		if !loadedAndAliased(have, b) {
			return false
		}
	}
	return len(l.have) > 0
}

// loadImages loads built into each pod node that lacks it, under its content tag and the :dev
// alias. The content tag is the image's digest, so a node that lists it has exactly this image;
// the alias must also name the same image, or the node gets the archive again to move it.
// onNodes are the nodes' images as the build step listed them; nil when it did not, and they are
// listed here. early is the load done while a new cluster was created, nil when there was none:
// when it failed, it is said, and the nodes get what they lack now.
func (u *up) loadImages(ctx context.Context, built []*ours.Built, onNodes *nodeImages, early *steps.Background[earlyLoad]) (string, error) {
	p := steps.From(ctx)
	if early != nil {
		l, err := early.Wait(nil)
		if err == nil {
			return fmt.Sprintf("Loaded %s (each also as :%s) into %d node(s) while the cluster was created", strings.Join(l.refs, ", "), ours.DevTag, l.nodes), nil
		}
		p.Printf("loading the images while the cluster was created failed, so loading them now: %s", steps.OneLine(err))
	}
	if onNodes == nil {
		var err error
		if onNodes, err = listNodeImages(u.cluster); err != nil {
			return "", err
		}
	}
	var toLoad []*ours.Built
	var targets []int
	for i, have := range onNodes.have {
		lacks := false
		for _, b := range built {
			if !loadedAndAliased(have, b) {
				lacks = true
				if !slices.Contains(toLoad, b) {
					toLoad = append(toLoad, b)
				}
			}
		}
		if lacks {
			targets = append(targets, i)
		}
	}
	if len(targets) == 0 {
		return "Images already on the nodes", nil
	}
	var refs []string
	for _, b := range toLoad {
		if b.Img == nil {
			return "", fmt.Errorf("%s was not built in this run, yet a node lacks it", b.Ref)
		}
		refs = append(refs, b.Ref.String())
	}
	var to []nodes.Node
	for _, i := range targets {
		to = append(to, onNodes.nodes[i])
	}
	if err := load.Archive(ctx, refs, ourArchive(toLoad), to); err != nil {
		return "", err
	}
	return fmt.Sprintf("Loaded %s (each also as :%s) into %d node(s)", strings.Join(refs, ", "), ours.DevTag, len(targets)), nil
}

// loadedAndAliased reports whether a node holds b under its content tag and its :dev alias
// names the same image.
func loadedAndAliased(have map[string]string, b *ours.Built) bool {
	digest, ok := ours.Lookup(have, b.Ref.String())
	if !ok {
		return false
	}
	dev, ok := ours.Lookup(have, b.Dev().String())
	return ok && dev == digest
}

// ourArchive writes our built images, under their content tags and the :dev alias, as an archive.
func ourArchive(built []*ours.Built) func(io.Writer) error {
	return func(w io.Writer) error { return ours.WriteArchive(w, built...) }
}
