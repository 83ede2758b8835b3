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

// early is that work, started by the step that creates the cluster and handed, part by part, to
// the steps that report it: the builds to "Building images", the load to "Loading images into the
// nodes", the apply to the applying and waiting steps. A part that is nil did not run (up found
// the cluster, or the part could not start): its step does the work itself. The images are of
// the sources as they were when up started.
type early struct {
	// builds are ours.All's, by name.
	builds map[string]*steps.Background[earlyBuild]
	// load and apply are nil when the kind config's nodes cannot be counted. apply is also nil
	// with --kueue.
	load  *steps.Background[earlyLoad]
	apply *steps.Background[earlyApply]
	// created closes once kind's Create has returned; stop ends the load's and apply's context.
	created chan struct{}
	stop    context.CancelFunc
}

// startEarly starts the early work for the cluster kind creates from cfg; the builds are of
// version, for arch.
func (u *up) startEarly(ctx context.Context, cfg []byte, version, arch string) early {
	builds, created := startBuilds(ctx, u.root, version, arch), make(chan struct{})
	e := early{builds: builds, created: created}
	ctx, e.stop = context.WithCancel(ctx)
	want, err := kindcluster.ConfigNodes(cfg)
	if err != nil {
		return e
	}
	load := steps.Go(func(func(string)) (earlyLoad, error) { return runLoad(ctx, builds, u.cluster, want) })
	e.load = load
	// With --kueue the operator starts after Kueue, which needs the cluster: the applying steps
	// do it.
	if !u.opts.Kueue {
		in := install{name: u.opts.Name, version: version}
		e.apply = steps.Go(func(func(string)) (earlyApply, error) {
			return runApply(ctx, builds, load, created, u.cluster, in), nil
		})
	}
	return e
}

// clusterCreated says that kind's Create has returned.
func (e early) clusterCreated() { close(e.created) }

// abandon stops the load and the apply after kind failed to create the cluster, and waits for
// them to end; the builds go on, for the cache.
func (e early) abandon() {
	e.stop()
	if e.load != nil {
		<-e.load.Done()
	}
	if e.apply != nil {
		<-e.apply.Done()
	}
}

// applied is what the early apply did; zero when there was none.
func (e early) applied() earlyApply {
	if e.apply == nil {
		return earlyApply{}
	}
	a, _ := e.apply.Wait(nil)
	return a
}

// earlyBuild is an image built while the cluster was created, of the sources as they were when
// up started. key is their hash; stable says the sources still hashed the same after the build,
// so that the cache may remember the image under key.
type earlyBuild struct {
	key    string
	keyErr error
	stable bool
	b      *ours.Built
	// cached: b is the image the cache kept for key, and there was no build.
	cached bool
}

// startBuilds starts building every image, or taking it from the cache when its sources are
// those of a kept image.
func startBuilds(ctx context.Context, root, version, arch string) map[string]*steps.Background[earlyBuild] {
	kept := imageCache(nil)
	builds := map[string]*steps.Background[earlyBuild]{}
	for _, img := range ours.All {
		builds[img.Name] = steps.Go(func(progress func(string)) (earlyBuild, error) {
			opts := ours.Options{Dir: root, Version: version, Arch: arch, Progress: progress}
			var e earlyBuild
			e.key, e.keyErr = ours.Key(ctx, opts, img)
			if e.keyErr == nil && kept.Dir != "" {
				if e.b, e.cached = kept.LoadImage(img, e.key); e.cached {
					return e, nil
				}
			}
			var err error
			if e.b, err = ours.Build(ctx, opts, img); err != nil {
				return e, err
			}
			if e.keyErr == nil {
				after, err := ours.Key(ctx, opts, img)
				e.stable = err == nil && after == e.key
			}
			return e, nil
		})
	}
	return builds
}

// earlyLoad is the loading of the early builds into the nodes our pods run on, each as soon as
// its containerd answers, while kind still configures Kubernetes on them: refs were loaded into
// nodes nodes. Its error says why the load stopped; the loading step then loads whatever a node
// lacks.
type earlyLoad struct {
	refs  []string
	nodes int
}

// nodesAppear bounds the wait for kind to start a new cluster's node containers.
const nodesAppear = 2 * time.Minute

// runLoad loads the early builds (once built) into the pod nodes of c, a cluster of want nodes.
func runLoad(ctx context.Context, builds map[string]*steps.Background[earlyBuild], c *kindcluster.Cluster, want int) (earlyLoad, error) {
	built, err := waitBuilds(ctx, builds)
	if err != nil {
		return earlyLoad{}, err
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
			return earlyLoad{}, fmt.Errorf("kind started %d of %d node containers in %s", len(all), want, nodesAppear)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return earlyLoad{}, err
		}
	}
	targets := kindcluster.PodNodes(all)
	path, _, err := load.WriteFile(ourArchive(built))
	if err != nil {
		return earlyLoad{}, err
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
		return earlyLoad{}, err
	}
	l := earlyLoad{nodes: len(targets)}
	for _, b := range built {
		l.refs = append(l.refs, b.Ref.String())
	}
	return l, nil
}

// waitBuilds waits for every early build, in ours.All' order; the first that failed fails it.
func waitBuilds(ctx context.Context, builds map[string]*steps.Background[earlyBuild]) ([]*ours.Built, error) {
	var built []*ours.Built
	for _, img := range ours.All {
		b := builds[img.Name]
		select {
		case <-b.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		got, err := b.Wait(nil)
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", img.Name, err)
		}
		built = append(built, got.b)
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
// that no pod of ours lands on a node that lacks its image. operator and nodeprobe are what the
// applying steps report: what was applied, or why applying failed (the step then applies
// again); zero when the early load failed.
type earlyApply struct {
	operator, nodeprobe applied
}

// all says both manifests were applied while the cluster was created.
func (a earlyApply) all() bool { return a.operator.done() && a.nodeprobe.done() }

// runApply applies the manifests of in, with the early builds, once the early load is done and
// the apiserver of c answers (created closes once kind's Create has returned). The wait gives up after one more try once kind's Create has
// returned: from then on the apiserver should answer at once.
func runApply(ctx context.Context, builds map[string]*steps.Background[earlyBuild], load *steps.Background[earlyLoad], created <-chan struct{}, c *kindcluster.Cluster, in install) earlyApply {
	var a earlyApply
	select {
	case <-load.Done():
	case <-ctx.Done():
		return a
	}
	if _, err := load.Wait(nil); err != nil {
		return a
	}
	for _, img := range ours.All {
		b, _ := builds[img.Name].Wait(nil)
		in.built = append(in.built, b.b)
	}
	kube, err := waitAPIServer(ctx, c, created)
	if err != nil {
		a.operator.err = err
		return a
	}
	if a.operator.line, a.operator.err = in.applyOperator(ctx, kube); a.operator.done() {
		a.nodeprobe.line, a.nodeprobe.err = in.applyNodeprobe(ctx, kube)
	}
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
