package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// What `devctl up` does while kind creates a new cluster. A new cluster holds none of our images
// and none of our manifests, so they are built, loaded and applied whatever happens; doing that
// beside kind's own work takes it off the critical path, which is most of a cold multi-node up.
// It is quiet (kind draws its own progress meanwhile): the later steps report what was done, or
// do it again and say why.

// earlyBuild is an image built while the cluster was created, of the sources as they were when
// up started. key is their hash; stable says the sources still hashed the same after the build,
// so that the cache may remember the image under key.
type earlyBuild struct {
	done   chan struct{}
	key    string
	keyErr error
	stable bool
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
			if e.err == nil && e.keyErr == nil {
				after, err := images.Key(ctx, opts, img)
				e.stable = err == nil && after == e.key
			}
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
	targets := kindcluster.PodNodes(all)
	path, _, err := writeArchive(ours(built))
	if err != nil {
		return err
	}
	defer os.Remove(path)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Go(func() {
			// Done again after kind's Create when this fails (the container may not run yet).
			_ = u.cluster.Mark(n)
			if slices.Contains(targets, n) {
				errs[i] = prepareWhenUp(ctx, n, path)
			}
		})
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

// prepareWhenUp, once node n's containerd answers, loads the archive into it and unpacks the
// preloaded images it will run. kind restarts each node's containerd once it has written the
// config's containerdConfigPatches (the local registry's is one): an import that the restart
// cuts short is tried again, until containerdUp has passed.
func prepareWhenUp(ctx context.Context, n nodes.Node, archive string) error {
	deadline := time.Now().Add(containerdUp)
	for {
		if n.Command("ctr", "version").Run() == nil {
			err := kindcluster.LoadArchive(n, archive)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return err
			}
		} else if time.Now().After(deadline) {
			return fmt.Errorf("containerd on node %s did not answer in %s", n, containerdUp)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	// Only time is lost when this fails: the kubelet unpacks them itself, as without devctl.
	_ = kindcluster.UnpackPreloaded(n)
	return nil
}

// writeArchive has write write a docker-archive into a new file, and returns its path and
// size. The caller removes the file.
func writeArchive(write func(io.Writer) error) (string, int64, error) {
	f, err := os.CreateTemp("", "devctl-images-*.tar")
	if err != nil {
		return "", 0, err
	}
	err = write(f)
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

// earlyApply is the applying of the operator's and nodeprobe's manifests as soon as a new
// cluster's apiserver answers, while kind still joins the workers and waits for the nodes to be
// Ready: our pods then start as soon as a node can run them. It begins after the early load, so
// that no pod of ours lands on a node that lacks its image.
type earlyApply struct {
	done chan struct{}
	// operator and nodeprobe are what the applying steps report: a steps.Done, or why applying
	// failed (the step then applies again); nil when there was no early apply (no early load).
	operator, nodeprobe error
}

// applyEarly starts applying the manifests once the early load is done and the apiserver
// answers. created closes when kind's Create has returned: from then on the apiserver should
// answer at once, and the wait gives up after one more try.
func (u *up) applyEarly(ctx context.Context, created <-chan struct{}) *earlyApply {
	a := &earlyApply{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		select {
		case <-u.loaded.done:
		case <-ctx.Done():
			return
		}
		if u.loaded.err != nil {
			return
		}
		for _, img := range images.Ours {
			u.built = append(u.built, u.early[img.Name].b)
		}
		if err := u.waitAPIServer(ctx, created); err != nil {
			a.operator = err
			return
		}
		if a.operator = u.applyOperator(ctx); steps.IsDone(a.operator) {
			a.nodeprobe = u.applyNodeprobe(ctx)
		}
	}()
	return a
}

// waitAPIServer waits until the kubeconfig of the cluster kind is creating exists (kubeadm
// writes it before it starts the control plane) and its apiserver reports itself ready.
func (u *up) waitAPIServer(ctx context.Context, created <-chan struct{}) error {
	var kube *clients
	last := false
	for {
		select {
		case <-created:
			last = true
		default:
		}
		var err error
		if kube == nil {
			kube, err = connect(u.cluster) // reads the kubeconfig off the control-plane node
		}
		if kube != nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = kube.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
			cancel()
			if err != nil {
				err = fmt.Errorf("the apiserver is not ready: %w", err)
			}
		}
		if err == nil || last {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// unlessEarly is an applying step: it reports what the early apply of a new cluster did (result
// picks which part), or runs apply.
func (u *up) unlessEarly(result func(*earlyApply) error, apply func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if u.applied != nil {
			if r := earlyResult(steps.From(ctx), result(u.applied)); r != nil {
				return r
			}
		}
		return apply(ctx)
	}
}

// earlyResult is what an applying step reports after the early apply: its line, marked as done
// while the cluster was created, or nil when the step must apply now (after saying why, when
// the early apply failed).
func earlyResult(p *steps.Progress, result error) error {
	switch {
	case result == nil:
		return nil
	case steps.IsDone(result):
		return steps.Done("%s, while the cluster was created", result.Error())
	default:
		p.Printf("applying while the cluster was created failed, so applying now: %s", oneLine(result))
		return nil
	}
}
