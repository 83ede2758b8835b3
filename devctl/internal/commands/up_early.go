package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
)

// What `devctl up` does while kind creates a new cluster. A new cluster holds none of our images,
// so they are built and loaded whatever happens; doing both beside kind's own work takes them off
// the critical path, which is most of a cold multi-node up. Both are quiet (kind draws its own
// progress meanwhile): the images and loading steps report what they did, or do it again.

// earlyBuild is an image built while the cluster was created. key is the sources' hash before
// the build: the images step takes the build only when the sources still hash the same.
type earlyBuild struct {
	done   chan struct{}
	key    string
	keyErr error
	b      *images.Built
	err    error
	// cached: b is the image the cache kept for key, and there was no build.
	cached bool
}

// buildEarly starts building every image, or taking it from the cache when its sources are
// those of a kept image.
func (u *up) buildEarly(ctx context.Context) {
	u.version = sourceVersion(ctx, u.root)
	opts := images.Options{Dir: u.root, Version: u.version, Arch: u.engine.Arch}
	cache := u.imageCache(nil)
	u.early = map[string]*earlyBuild{}
	for _, img := range images.Ours {
		e := &earlyBuild{done: make(chan struct{})}
		u.early[img.Name] = e
		go func() {
			defer close(e.done)
			e.key, e.keyErr = images.Key(ctx, opts, img)
			if e.keyErr == nil && cache.Dir != "" {
				if e.b, e.cached = cache.LoadImage(img, e.key); e.cached {
					return
				}
			}
			e.b, e.err = images.Build(ctx, opts, img)
		}()
	}
}

// earlyLoad is the loading of the early builds into the nodes our pods run on, each as soon as
// its containerd answers, while kind still configures Kubernetes on them.
type earlyLoad struct {
	done chan struct{}
	// refs were loaded into nodes nodes.
	refs  []string
	nodes int
	// err says why the load stopped; the loading step then loads whatever a node lacks.
	err error
}

// nodesAppear bounds the wait for kind to start a new cluster's node containers.
const nodesAppear = 2 * time.Minute

// loadEarly starts loading the early builds into the pod nodes of a cluster of want nodes.
func (u *up) loadEarly(ctx context.Context, want int) *earlyLoad {
	l := &earlyLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.err = u.runEarlyLoad(ctx, want, l)
	}()
	return l
}

func (u *up) runEarlyLoad(ctx context.Context, want int, l *earlyLoad) error {
	var built []*images.Built
	var refs []string
	for _, img := range images.Ours {
		e := u.early[img.Name]
		select {
		case <-e.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if e.err != nil {
			return fmt.Errorf("building %s: %w", img.Name, e.err)
		}
		built = append(built, e.b)
		refs = append(refs, e.b.Ref.String())
	}
	// kind starts every node container at once, before it configures any; a node listed late
	// would only be loaded later, by the loading step.
	deadline := time.Now().Add(nodesAppear)
	var all []nodes.Node
	for {
		all, _ = u.cluster.Nodes() // an error until the first container exists
		if len(all) >= want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kind started %d of %d node containers in %s", len(all), want, nodesAppear)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	targets := podNodes(all)
	path, _, err := writeArchive(built)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Go(func() { errs[i] = loadWhenUp(ctx, n, path) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.refs, l.nodes = refs, len(targets)
	return nil
}

// containerdUp bounds the wait for a new node's containerd to answer.
const containerdUp = time.Minute

// loadWhenUp loads the archive into node n once its containerd answers.
func loadWhenUp(ctx context.Context, n nodes.Node, archive string) error {
	deadline := time.Now().Add(containerdUp)
	for n.Command("ctr", "version").Run() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd on node %s did not answer in %s", n, containerdUp)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return kindcluster.LoadArchive(n, archive)
}

// writeArchive writes the images, under their content tags and the :dev alias, into a new
// docker-archive file, and returns its path and size. The caller removes the file.
func writeArchive(built []*images.Built) (string, int64, error) {
	f, err := os.CreateTemp("", "devctl-images-*.tar")
	if err != nil {
		return "", 0, err
	}
	err = images.WriteArchive(f, built...)
	if err != nil {
		err = fmt.Errorf("writing the image archive: %w", err)
	}
	size, serr := f.Seek(0, io.SeekCurrent)
	if err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), size, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
