package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/devctl/internal/registry"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// UpOptions are the settings of `devctl up`.
type UpOptions struct {
	// Name is the kind cluster's name.
	Name string
	// Config is a kind config file; empty means clusters/kind.yaml, else a built-in one.
	Config string
	// NodeImage, when set, overrides the node image of the config.
	NodeImage string
	// Workers, when more than 0, makes a new cluster one control plane and this many workers,
	// with flannel as its pod network, in place of Config.
	Workers int
	// Wait bounds each wait: for the control plane, the operator, nodeprobe.
	Wait time.Duration
	// NoRegistry leaves out the local registry (package registry).
	NoRegistry bool
}

// Up makes sure a kind cluster runs with the operator and nodeprobe built from the checkout's
// source: each step is skipped when its work is already done. An image is built only when the
// hash of its sources (images.Key) names no image the nodes already hold, so a second run on an
// unchanged checkout builds nothing and only compares. Status lines go to status, the summary to
// out.
func Up(ctx context.Context, opts UpOptions, status, out io.Writer) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	u := &up{opts: opts, root: root, cluster: kindcluster.New(opts.Name, kindcmd.NewLogger()), ctx: ctx}
	r := steps.Runner{Out: status, Terminal: steps.IsTerminal(status)}
	all := []steps.Step{
		{Name: "Checking Docker", Run: u.checkDocker},
		{Name: "Choosing the node image", Run: u.chooseNodeImage},
		// kind draws its own progress while it creates the cluster.
		{Name: "Creating cluster " + opts.Name, Run: u.createCluster, OwnProgress: true},
		{Name: "Building images", Run: u.buildImages},
		{Name: "Loading images into the nodes", Run: u.loadImages},
		{Name: "Applying the operator manifests", Run: u.unlessEarly(func(a *earlyApply) error { return a.operator }, u.applyOperator)},
		{Name: "Waiting for the operator", Run: u.waitOperator},
		// nodeprobe after the operator: its manifests need the operator's namespace and the
		// accelerator ConfigMap it fills.
		{Name: "Applying the nodeprobe manifests", Run: u.unlessEarly(func(a *earlyApply) error { return a.nodeprobe }, u.applyNodeprobe)},
		{Name: "Waiting for nodeprobe", Run: u.waitNodeprobe},
	}
	if !opts.NoRegistry {
		all = append(all, steps.Step{Name: "Running the local registry " + registry.Host, Run: u.runRegistry})
	}
	err = r.Run(ctx, all...)
	if err != nil {
		return err
	}
	u.summary(out)
	return nil
}

type up struct {
	// ctx is Up's: the early builds outlive the step that starts them.
	ctx     context.Context
	opts    UpOptions
	root    string
	cluster *kindcluster.Cluster
	engine  *kindcluster.Engine
	version string
	built   []*images.Built
	kube    *clients
	// nodes are the cluster's nodes and have, for each, the images it holds (reference →
	// digest), as they were before this run loaded any.
	nodes []nodes.Node
	have  []map[string]string
	// early are the images built while a new cluster was being created, by image name, and
	// loaded is their loading into its nodes meanwhile, applied the applying of the manifests
	// (up_early.go).
	early   map[string]*earlyBuild
	loaded  *earlyLoad
	applied *earlyApply
	// stopLoad ends the early load's context once it is done.
	stopLoad context.CancelFunc
	// registry is the local registry's image, readied from the start (up_registry.go).
	registry *registryImage
	// published says the node image is kind's published one (up_nodeimage.go), whose pod
	// network is kindnet.
	published bool
}

func (u *up) checkDocker(ctx context.Context) error {
	engine, err := kindcluster.CheckDocker(ctx)
	if err != nil {
		return err
	}
	u.engine = engine
	if !u.opts.NoRegistry {
		u.readyRegistryImage()
	}
	return steps.Done("Docker %s answers", engine.Version)
}

func (u *up) createCluster(ctx context.Context) error {
	exists, err := u.cluster.Exists()
	if err != nil {
		return err
	}
	if exists {
		if err := u.cluster.CheckOurs(ctx); err != nil {
			return err
		}
		if u.opts.Workers > 0 {
			all, err := u.cluster.Nodes()
			if err != nil {
				return err
			}
			if len(all) != u.opts.Workers+1 {
				return fmt.Errorf("cluster %s exists with %d node(s); --workers %d asks for %d: --workers shapes a cluster only when up creates it, so delete this one first (devctl down --name %s)", u.opts.Name, len(all), u.opts.Workers, u.opts.Workers+1, u.opts.Name)
			}
		}
		if err := u.cluster.ExportKubeConfig(); err != nil {
			return fmt.Errorf("writing the kubeconfig context %s: %w", u.cluster.Context(), err)
		}
		return steps.Done("Cluster %s exists", u.opts.Name)
	}
	cfg, from, err := u.config()
	if err != nil {
		return err
	}
	if !u.opts.NoRegistry {
		if cfg, err = registry.KindConfig(cfg); err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
	}
	u.buildEarly(u.ctx)
	lctx, stopLoad := context.WithCancel(u.ctx)
	created := make(chan struct{})
	if want, err := kindcluster.ConfigNodes(cfg); err == nil {
		u.loaded = u.loadEarly(lctx, want)
		u.applied = u.applyEarly(lctx, created)
	}
	if err := u.cluster.Create(cfg, u.opts.NodeImage, u.opts.Wait); err != nil {
		stopLoad()
		if u.loaded != nil {
			<-u.loaded.done
			<-u.applied.done
		}
		return err
	}
	close(created)
	u.stopLoad = stopLoad
	return steps.Done("Created cluster %s from %s", u.opts.Name, from)
}

// config is the kind config of a new cluster, and where it comes from.
func (u *up) config() ([]byte, string, error) {
	if u.opts.Workers <= 0 {
		if u.published && u.opts.Config == "" {
			// clusters/kind.yaml is the offline image's: it leaves out kindnet, which this image has.
			return []byte(kindcluster.PublishedConfig), "the built-in single-node config of kind's published image (kindnet)", nil
		}
		return clusterConfig(u.root, u.opts.Config, kindcluster.DefaultConfig)
	}
	if u.opts.Config != "" {
		return nil, "", errors.New("--workers and --config both shape the cluster: give one (a config file lists its own nodes)")
	}
	dir, err := netDir(u.opts.Name)
	if err != nil {
		return nil, "", err
	}
	// Empty folders: a config left by an earlier cluster of this name would make a node Ready
	// before its flannel runs.
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", err
	}
	for i := 0; i <= u.opts.Workers; i++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("node-%d", i)), 0o755); err != nil {
			return nil, "", err
		}
	}
	return kindcluster.MultiNodeConfig(u.opts.Workers, dir), fmt.Sprintf("--workers %d (1 control plane, %d workers, flannel)", u.opts.Workers, u.opts.Workers), nil
}

// netDir holds, for a multi-node cluster, each node's /etc/cni/net.d.
func netDir(cluster string) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("no folder for the nodes' network configs: %w", err)
	}
	return filepath.Join(dir, "clusters", cluster, "cni"), nil
}

// buildImages builds the images whose sources changed since the nodes got them: an image whose
// key (the hash of its sources, build flags and toolchain) gave an image that every node holds
// is not built again.
func (u *up) buildImages(ctx context.Context) error {
	p := steps.From(ctx)
	if u.applied != nil {
		// It used the early builds, and is done once the apiserver answered.
		<-u.applied.done
		u.built = nil
	}
	if u.early == nil {
		u.version = sourceVersion(ctx, u.root)
	}
	opts := images.Options{Dir: u.root, Version: u.version, Arch: u.engine.Arch}
	// The nodes' images are listed while the keys are computed; after an early load, which
	// loaded every early build into every pod node, there is nothing to list.
	listed := make(chan struct{})
	var listErr error
	go func() {
		defer close(listed)
		if u.loaded != nil {
			<-u.loaded.done
			u.stopLoad()
			if u.loaded.err == nil {
				return
			}
		}
		listErr = u.listNodeImages()
	}()
	cache := u.imageCache(p)
	// At once: after a change, each build is mostly its link, one core each, and nodeprobe's
	// (cgo, through the C linker) is the longest.
	got := make([]*images.Built, len(images.Ours))
	origins := make([]origin, len(images.Ours))
	errs := make([]error, len(images.Ours))
	var wg sync.WaitGroup
	for i, img := range images.Ours {
		wg.Go(func() { got[i], origins[i], errs[i] = u.buildImage(ctx, p, cache, opts, img, listed) })
	}
	wg.Wait()
	<-listed
	if err := errors.Join(append(errs, listErr)...); err != nil {
		return err
	}
	byOrigin := map[origin][]string{}
	for i, b := range got {
		u.built = append(u.built, b)
		byOrigin[origins[i]] = append(byOrigin[origins[i]], b.Ref.String())
	}
	if len(byOrigin) == 1 && byOrigin[unchanged] != nil {
		return steps.Done("Images unchanged, already on the nodes: %s (version %s)", strings.Join(byOrigin[unchanged], ", "), u.version)
	}
	var parts []string
	for _, o := range []origin{built, fromCache, unchanged} {
		if refs := byOrigin[o]; refs != nil {
			parts = append(parts, string(o)+" "+strings.Join(refs, ", "))
		}
	}
	parts[0] = strings.ToUpper(parts[0][:1]) + parts[0][1:]
	return steps.Done("%s (version %s)", strings.Join(parts, "; "), u.version)
}

// origin is where an image of this run comes from.
type origin string

const (
	built     origin = "built"
	fromCache origin = "taken from the cache"
	unchanged origin = "unchanged"
)

// imageCache is where built images are remembered, by key; without a cache directory, nothing is.
func (u *up) imageCache(p *steps.Progress) images.Cache {
	dir, err := cacheDir()
	if err != nil {
		if p != nil {
			p.Printf("building every image: no cache directory (%v)", err)
		}
		return images.Cache{}
	}
	return images.Cache{Dir: filepath.Join(dir, "images")}
}

// buildImage returns img's image and where it comes from: the early build (of the sources as
// they were when up started), an earlier build of the same key that the nodes hold already
// (unchanged: then there is no build), one the cache kept, or a build. listed closes once u.have
// is filled in.
func (u *up) buildImage(ctx context.Context, p *steps.Progress, cache images.Cache, opts images.Options, img images.Image, listed <-chan struct{}) (*images.Built, origin, error) {
	if e := u.early[img.Name]; e != nil {
		<-e.done
		if e.err == nil {
			task := p.Start("building " + img.Name)
			if e.cached {
				task.Done("took %s from the cache while the cluster was created", e.b.Ref)
				return e.b, fromCache, nil
			}
			task.Done("built %s while the cluster was created", e.b.Ref)
			if e.stable {
				u.remember(p, cache, e.key, e.b)
			}
			return e.b, built, nil
		}
		// Built again below, where the failure shows.
	}
	key, keyErr := images.Key(ctx, opts, img)
	switch {
	case keyErr != nil:
		p.Printf("cannot hash the sources of %s, building it: %s", img.Name, oneLine(keyErr))
	case cache.Dir != "":
		if ref, ok := cache.Lookup(img, key); ok {
			<-listed
			b := &images.Built{Image: img, Ref: ref}
			if u.onEveryNode(b) {
				return b, unchanged, nil
			}
		}
		if b, ok := cache.LoadImage(img, key); ok {
			task := p.Start("building " + img.Name)
			task.Done("took %s from the cache", b.Ref)
			return b, fromCache, nil
		}
	}
	task := p.Start("building " + img.Name)
	opts.Progress = task.Doing
	b, err := images.Build(ctx, opts, img)
	if err != nil {
		task.Fail()
		return nil, built, err
	}
	task.Done("built %s", b.Ref)
	if keyErr == nil {
		// Remembered only when the sources did not change during the build: else the image may
		// be of other sources than the key's.
		if after, err := images.Key(ctx, opts, img); err == nil && after == key {
			u.remember(p, cache, key, b)
		}
	}
	return b, built, nil
}

// remember records that key gave b, and keeps b, so that the next cluster needs no build.
func (u *up) remember(p *steps.Progress, cache images.Cache, key string, b *images.Built) {
	if cache.Dir == "" {
		return
	}
	if err := errors.Join(cache.Store(key, b.Ref), cache.StoreImage(key, b)); err != nil {
		p.Printf("not remembering the build of %s: %v", b.Ref, err)
	}
}

// listNodeImages finds the cluster's nodes and the images each holds.
func (u *up) listNodeImages() error {
	all, err := u.cluster.Nodes()
	if err != nil {
		return err
	}
	all = kindcluster.PodNodes(all)
	u.nodes, u.have = all, make([]map[string]string, len(all))
	for i, n := range all {
		if u.have[i], err = kindcluster.NodeImages(n); err != nil {
			return err
		}
	}
	return nil
}

// onEveryNode reports whether every node holds b under its content tag, with the :dev alias on
// the same image.
func (u *up) onEveryNode(b *images.Built) bool {
	for _, have := range u.have {
		if !loadedAndAliased(have, b) {
			return false
		}
	}
	return len(u.have) > 0
}

// loadImages loads into each node the images it lacks, under their content tag and the :dev
// alias. The content tag is the image's digest, so a node that lists it has exactly this image;
// the alias must also name the same image, or the node gets the archive again to move it.
func (u *up) loadImages(ctx context.Context) error {
	p := steps.From(ctx)
	var toLoad []*images.Built
	var targets []int
	for i, have := range u.have {
		lacks := false
		for _, b := range u.built {
			if !loadedAndAliased(have, b) {
				lacks = true
				if !contains(toLoad, b) {
					toLoad = append(toLoad, b)
				}
			}
		}
		if lacks {
			targets = append(targets, i)
		}
	}
	early := u.loaded
	if early != nil && early.err != nil {
		p.Printf("loading the images while the cluster was created failed, so loading them now: %s", oneLine(early.err))
	}
	if len(targets) == 0 {
		if early != nil && early.err == nil {
			return steps.Done("Loaded %s (each also as :%s) into %d node(s) while the cluster was created", strings.Join(early.refs, ", "), images.DevTag, early.nodes)
		}
		return steps.Done("Images already on the nodes")
	}
	var refs []string
	for _, b := range toLoad {
		if b.Img == nil {
			return fmt.Errorf("%s was not built in this run, yet a node lacks it", b.Ref)
		}
		refs = append(refs, b.Ref.String())
	}
	var to []nodes.Node
	for _, i := range targets {
		to = append(to, u.nodes[i])
	}
	if err := shipArchive(ctx, refs, ours(toLoad), to); err != nil {
		return err
	}
	return steps.Done("Loaded %s (each also as :%s) into %d node(s)", strings.Join(refs, ", "), images.DevTag, len(targets))
}

// cacheDir is where devctl keeps what it remembers between runs, beside what the scripts cache:
// $MLKUBE_CACHE, else $XDG_CACHE_HOME/mlkube, else ~/.cache/mlkube.
func cacheDir() (string, error) {
	if dir := os.Getenv("MLKUBE_CACHE"); dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mlkube"), nil
}

// loadedAndAliased reports whether a node holds b under its content tag and its :dev alias
// names the same image.
func loadedAndAliased(have map[string]string, b *images.Built) bool {
	digest, ok := images.Lookup(have, b.Ref.String())
	if !ok {
		return false
	}
	dev, ok := images.Lookup(have, b.Dev().String())
	return ok && dev == digest
}

func (u *up) applyOperator(ctx context.Context) error {
	objs, err := manifests.Read(config.FS, config.Default)
	if err != nil {
		return fmt.Errorf("reading the operator manifests: %w", err)
	}
	if err := manifests.SetImage(objs, operatorDevImage, u.operatorImage()); err != nil {
		return err
	}
	d := manifests.Find(objs, "Deployment", operatorNamespace, operatorDeployment)
	if d == nil {
		return fmt.Errorf("the operator manifests have no Deployment %s/%s", operatorNamespace, operatorDeployment)
	}
	annotations := d.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[versionAnnotation] = u.version
	d.SetAnnotations(annotations)

	if u.kube, err = connect(u.cluster); err != nil {
		return err
	}
	objs, kept, err := withoutLiveAcceleratorConfig(ctx, u.kube, objs)
	if err != nil {
		return err
	}
	// Objects as devctl's last apply left them are not applied again: the CRDs' no-op applies
	// are most of this step's time.
	var mem *manifests.Memory
	if dir, err := cacheDir(); err == nil {
		mem = manifests.OpenMemory(filepath.Join(dir, "applied", u.opts.Name+".json"))
	}
	applied, err := manifests.ApplyRemembering(ctx, u.kube, objs, mem)
	if serr := mem.Save(); err == nil && serr != nil {
		steps.From(ctx).Printf("not remembering what was applied: %v", serr)
	}
	if err != nil {
		return err
	}
	if kept {
		return steps.Done("Applied the operator manifests: %s; kept the accelerator config (nodeprobe's)", applied)
	}
	return steps.Done("Applied the operator manifests: %s", applied)
}

// waitOperator waits for every kind's CRD to be served and the operator Deployment to run the new
// image on every replica; both already true means nothing changed, and there is no wait.
func (u *up) waitOperator(ctx context.Context) error {
	key := client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}
	var checks []manifests.Check
	for _, k := range v1beta1.Kinds {
		checks = append(checks, manifests.CRDEstablished(u.kube, k.CRD()))
	}
	ready := manifests.All(append(checks, manifests.DeploymentRolledOut(u.kube, key))...)
	if ok, _, err := ready(ctx); err == nil && ok {
		if u.appliedEarly() {
			return steps.Done("Operator running %s, started while the cluster was created", u.operatorImage())
		}
		return steps.Done("Operator already running %s", u.operatorImage())
	}

	wctx, cancel := context.WithTimeout(ctx, u.opts.Wait)
	defer cancel()
	err := manifests.Wait(wctx, time.Second, ready)
	if err == nil {
		return steps.Done("Operator running %s", u.operatorImage())
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	kubectl := fmt.Sprintf("kubectl --context %s -n %s", u.cluster.Context(), operatorNamespace)
	diagnosis := manifests.Diagnose(dctx, u.kube.kube, key, kubectl)
	return fmt.Errorf("the operator is not ready after %s: %w\n%s", u.opts.Wait, err, strings.TrimRight(diagnosis, "\n"))
}

// appliedEarly reports whether the manifests were applied while the cluster was created.
func (u *up) appliedEarly() bool {
	return u.applied != nil && steps.IsDone(u.applied.operator) && steps.IsDone(u.applied.nodeprobe)
}

func (u *up) operatorImage() string { return u.image("mlkube/operator", operatorDevImage) }

func (u *up) summary(out io.Writer) {
	flag := ""
	if u.opts.Name != DefaultName {
		flag = " --name " + u.opts.Name
	}
	fmt.Fprintf(out, "\nmlkube is up on kind cluster %s; kubectl now uses context %s.\n", u.opts.Name, u.cluster.Context())
	fmt.Fprintf(out, "  operator %s, image %s\n", u.version, u.operatorImage())
	fmt.Fprintf(out, "  nodeprobe on every node, image %s (what it found: devctl status%s)\n", u.image("mlkube/nodeprobe", nodeprobeDevImage), flag)
	if u.registry != nil {
		fmt.Fprintf(out, "  local registry %s: docker push %[1]s/NAME:TAG, and name that image in a job\n", registry.Host)
	}
	fmt.Fprintf(out, "\nNext:\n  kubectl get tfjobs\n  devctl status%s\n  devctl down%s\n", flag, flag)
}

func contains(list []*images.Built, b *images.Built) bool {
	for _, l := range list {
		if l == b {
			return true
		}
	}
	return false
}
