package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/images/load"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// What `devctl up` does while kind creates a new cluster. A new cluster holds none of our images
// and none of our manifests, so they are built, loaded and applied whatever happens; doing that
// beside kind's own work takes it off the critical path, which is most of a cold multi-node up.
// It is quiet (kind draws its own progress meanwhile): the later steps report what was done, or
// do it again and say why.

// early is that work: the images are of the sources as they were when up started. Its state is
// its own; the steps read it through its methods, which a nil early (up found the cluster)
// answers as "nothing done".
type early struct {
	builds map[string]*earlyBuild
	// load and apply are nil when the kind config's nodes cannot be counted: the steps then do
	// their work themselves. apply is also nil with --kueue.
	load  *earlyLoad
	apply *earlyApply
	// created closes once kind's Create has returned; stop ends the load's and apply's context.
	created chan struct{}
	stop    context.CancelFunc
}

// startEarly starts the early work for the cluster kind creates from cfg.
func (u *up) startEarly(cfg []byte) *early {
	e := &early{builds: u.buildEarly(), created: make(chan struct{})}
	ctx, stop := context.WithCancel(u.ctx)
	e.stop = stop
	if want, err := kindcluster.ConfigNodes(cfg); err == nil {
		e.load = e.startLoad(ctx, u.cluster, want)
		// With --kueue the operator starts after Kueue, which needs the cluster: the applying
		// steps do it.
		if !u.opts.Kueue {
			e.apply = e.startApply(ctx, u.cluster, u.install)
		}
	}
	return e
}

// clusterCreated says that kind's Create has returned.
func (e *early) clusterCreated() { close(e.created) }

// abandon stops the load and the apply after kind failed to create the cluster, and waits for
// them to end; the builds go on, for the cache.
func (e *early) abandon() {
	e.stop()
	e.wait()
}

// wait waits for the load and the apply, those there are, to end.
func (e *early) wait() {
	if e.load != nil {
		<-e.load.done
	}
	if e.apply != nil {
		<-e.apply.done
	}
}

// finish waits for the load and the apply to end, and reports whether the load put every early
// build on every node our pods run on.
func (e *early) finish() bool {
	if e == nil {
		return false
	}
	e.wait()
	e.stop()
	return e.load != nil && e.load.err == nil
}

// build is the early build of the image called name; nil when there was none.
func (e *early) build(name string) *earlyBuild {
	if e == nil {
		return nil
	}
	return e.builds[name]
}

// loaded is the early load; nil when there was none.
func (e *early) loaded() *earlyLoad {
	if e == nil {
		return nil
	}
	return e.load
}

// applied is the early apply; nil when there was none.
func (e *early) applied() *earlyApply {
	if e == nil {
		return nil
	}
	return e.apply
}

// appliedAll reports whether both manifests were applied while the cluster was created.
func (e *early) appliedAll() bool {
	a := e.applied()
	return a != nil && a.operator.done() && a.nodeprobe.done()
}

// earlyBuild is an image built while the cluster was created, of the sources as they were when
// up started. key is their hash; stable says the sources still hashed the same after the build,
// so that the cache may remember the image under key.
type earlyBuild struct {
	done   chan struct{}
	key    string
	keyErr error
	stable bool
	b      *ours.Built
	err    error
	// cached: b is the image the cache kept for key, and there was no build.
	cached bool
}

// buildEarly starts building every image, or taking it from the cache when its sources are
// those of a kept image.
func (u *up) buildEarly() map[string]*earlyBuild {
	ctx := u.ctx
	opts := ours.Options{Dir: u.root, Version: u.version, Arch: u.engine.Arch}
	kept := u.imageCache(nil)
	builds := map[string]*earlyBuild{}
	for _, img := range ours.All {
		e := &earlyBuild{done: make(chan struct{})}
		builds[img.Name] = e
		go func() {
			defer close(e.done)
			e.key, e.keyErr = ours.Key(ctx, opts, img)
			if e.keyErr == nil && kept.Dir != "" {
				if e.b, e.cached = kept.LoadImage(img, e.key); e.cached {
					return
				}
			}
			e.b, e.err = ours.Build(ctx, opts, img)
			if e.err == nil && e.keyErr == nil {
				after, err := ours.Key(ctx, opts, img)
				e.stable = err == nil && after == e.key
			}
		}()
	}
	return builds
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

// startLoad starts loading the early builds into the pod nodes of c, a cluster of want nodes.
func (e *early) startLoad(ctx context.Context, c *kindcluster.Cluster, want int) *earlyLoad {
	l := &earlyLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.err = e.runLoad(ctx, c, want, l)
	}()
	return l
}

func (e *early) runLoad(ctx context.Context, c *kindcluster.Cluster, want int, l *earlyLoad) error {
	built, err := e.waitBuilds(ctx)
	if err != nil {
		return err
	}
	// kind starts every node container at once, before it configures any; a node listed late
	// would only be loaded later, by the loading step.
	deadline := time.Now().Add(nodesAppear)
	var all []nodes.Node
	for {
		all, _ = c.Nodes() // an error until the first container exists
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
	path, _, err := load.WriteFile(ourArchive(built))
	if err != nil {
		return err
	}
	defer os.Remove(path)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Go(func() {
			// Done again after kind's Create when this fails (the container may not run yet).
			_ = c.Mark(n)
			if slices.Contains(targets, n) {
				errs[i] = prepareWhenUp(ctx, n, path)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, b := range built {
		l.refs = append(l.refs, b.Ref.String())
	}
	l.nodes = len(targets)
	return nil
}

// waitBuilds waits for every early build, in ours.All' order; the first that failed fails it.
func (e *early) waitBuilds(ctx context.Context) ([]*ours.Built, error) {
	var built []*ours.Built
	for _, img := range ours.All {
		b := e.builds[img.Name]
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if b.err != nil {
			return nil, fmt.Errorf("building %s: %w", img.Name, b.err)
		}
		built = append(built, b.b)
	}
	return built, nil
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
	// operator and nodeprobe are what the applying steps report: what was applied, or why
	// applying failed (the step then applies again); zero when there was no early apply (no early
	// load).
	operator, nodeprobe applied
	// kube reached the cluster, for the steps after an applying step that reports the early apply.
	kube *cluster.Clients
}

// startApply starts applying the manifests of in, with the early builds, once the early load is
// done and the apiserver of c answers. The wait gives up after one more try once kind's Create
// has returned: from then on the apiserver should answer at once.
func (e *early) startApply(ctx context.Context, c *kindcluster.Cluster, in install) *earlyApply {
	a := &earlyApply{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		select {
		case <-e.load.done:
		case <-ctx.Done():
			return
		}
		if e.load.err != nil {
			return
		}
		for _, img := range ours.All {
			in.built = append(in.built, e.builds[img.Name].b)
		}
		if a.kube, a.operator.err = waitAPIServer(ctx, c, e.created); a.operator.err != nil {
			return
		}
		if a.operator.line, a.operator.err = in.applyOperator(ctx, a.kube); a.operator.done() {
			a.nodeprobe.line, a.nodeprobe.err = in.applyNodeprobe(ctx, a.kube)
		}
	}()
	return a
}

// applied is what applying manifests did: the step's line, or why it failed.
type applied struct {
	line string
	err  error
}

func (a applied) done() bool { return a.err == nil && a.line != "" }

// waitAPIServer waits until the kubeconfig of the cluster kind is creating exists (kubeadm
// writes it before it starts the control plane) and its apiserver reports itself ready; after
// created closes, it tries once more.
func waitAPIServer(ctx context.Context, c *kindcluster.Cluster, created <-chan struct{}) (*cluster.Clients, error) {
	var kube *cluster.Clients
	last := false
	for {
		select {
		case <-created:
			last = true
		default:
		}
		var err error
		if kube == nil {
			kube, err = cluster.Connect(c) // reads the kubeconfig off the control-plane node
		}
		if kube != nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = kube.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
			if err != nil {
				err = fmt.Errorf("the apiserver is not ready: %w", err)
			} else {
				// Ready is not yet allowed: kubeadm binds kind's admin user to cluster-admin after
				// the apiserver is up, and until then every request of it is Forbidden.
				_, err = kube.Kube.CoreV1().Namespaces().List(rctx, metav1.ListOptions{Limit: 1})
				if err != nil {
					err = fmt.Errorf("the apiserver does not let kind's admin in yet: %w", err)
				}
			}
			cancel()
		}
		if err == nil || last {
			return kube, err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// unlessEarly is an applying step: it reports what the early apply of a new cluster did (part
// picks which part), or runs apply with the cluster's clients.
func (u *up) unlessEarly(part func(*earlyApply) applied, apply func(context.Context, *cluster.Clients) (string, error)) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if a := u.early.applied(); a != nil {
			if line, ok := earlyResult(steps.From(ctx), part(a)); ok {
				u.kube = a.kube
				return line, nil
			}
		}
		kube, err := u.clients()
		if err != nil {
			return "", err
		}
		return apply(ctx, kube)
	}
}

// earlyResult is what an applying step reports after the early apply: its line, marked as done
// while the cluster was created, or false when the step must apply now (after saying why, when
// the early apply failed).
func earlyResult(p *steps.Progress, result applied) (string, bool) {
	switch {
	case result.done():
		return result.line + ", while the cluster was created", true
	case result.err != nil:
		p.Printf("applying while the cluster was created failed, so applying now: %s", steps.OneLine(result.err))
	}
	return "", false
}
