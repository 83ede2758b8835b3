// Package up is `devctl up`: the steps that make sure a kind cluster runs the operator and
// nodeprobe built from the checkout's source. Where to look:
//
//   - up.go: the pipeline of steps (Run), with what each is given and returns, the cluster's
//     creation and its kind config;
//   - nodeimage.go: which node image a new cluster gets;
//   - early.go: the work done while kind creates a new cluster (building, loading, applying),
//     which the creating step starts and hands, part by part, to the steps that report it;
//   - images.go: building our images, or finding them unchanged, and loading them into the nodes;
//   - manifests.go: applying the operator's and nodeprobe's manifests and waiting for them;
//   - kueue.go: --kueue's steps;
//   - registry.go: the local registry.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/checkout"
	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/images/scripted"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/kueue"
	"github.com/mlkube/mlkube/devctl/internal/registry"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// Options are the settings of `devctl up`.
type Options struct {
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
	// Kueue installs Kueue (package kueue) with the default queues, before the operator, which
	// then runs its Kueue integration.
	Kueue bool
	// KueuePodsReadyTimeout is Kueue's waitForPodsReady timeout.
	KueuePodsReadyTimeout time.Duration
}

// Run makes sure a kind cluster runs with the operator and nodeprobe built from the checkout's
// source: each step is skipped when its work is already done. An image is built only when the
// hash of its sources (ours.Key) names no image the nodes already hold, so a second run on an
// unchanged checkout builds nothing and only compares. Status lines go to status, the summary to
// out.
//
// The steps run one after the other, as kind's create runs its actions. Each is a function of
// the values it is given, which the steps before it returned: the variables below, each written
// by one step and read by those after it.
func Run(ctx context.Context, opts Options, status, out io.Writer) error {
	root, err := checkout.Root()
	if err != nil {
		return err
	}
	// Work started in the background (the early work, the registry's and Kueue's images) ends
	// with Run.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := &up{opts: opts, root: root, cluster: kindcluster.New(opts.Name, kindcmd.NewLogger())}
	version := checkout.Version(ctx, root)
	var (
		engine        *kindcluster.Engine
		registryImage *steps.Background[string]             // nil with --registry=false
		kueueBuild    *steps.Background[*scripted.Scripted] // nil without --kueue
		node          nodeImage
		made          madeCluster
		built         []*ours.Built
		onNodes       *nodeImages
		kueueImage    *scripted.Scripted
		appliedEarly  earlyApply // what the early apply did, zero when there was none
	)
	in := func() install { return install{name: opts.Name, version: version, built: built} }
	all := []steps.Step{
		{Name: "Checking Docker", Run: func(sctx context.Context) (line string, err error) {
			if engine, line, err = checkDocker(sctx); err != nil {
				return "", err
			}
			// Built from the start: on a cold machine they take minutes, which then overlap the
			// cluster's creation and our images' builds.
			if !opts.NoRegistry {
				registryImage = u.startRegistryImage(ctx, engine.Arch)
			}
			if opts.Kueue {
				kueueBuild = u.startKueue(ctx, engine.Arch)
			}
			return line, nil
		}},
		{Name: "Choosing the node image", Run: func(sctx context.Context) (line string, err error) {
			node, line, err = u.chooseNodeImage(sctx)
			return line, err
		}},
		// kind draws its own progress while it creates the cluster.
		{Name: "Creating cluster " + opts.Name, OwnProgress: true, Run: func(sctx context.Context) (line string, err error) {
			made, line, err = u.createCluster(ctx, sctx, node, version, engine.Arch)
			return line, err
		}},
		{Name: "Building images", Run: func(sctx context.Context) (line string, err error) {
			built, onNodes, line, err = u.buildImages(sctx, version, engine.Arch, made.early.builds)
			return line, err
		}},
		{Name: "Loading images into the nodes", Run: func(sctx context.Context) (string, error) {
			return u.loadImages(sctx, built, onNodes, made.early.load)
		}},
	}
	if opts.Kueue {
		// Before the operator: its Kueue integration needs Kueue's CRDs when it starts.
		all = append(all, []steps.Step{
			{Name: "Readying Kueue's image", Run: func(sctx context.Context) (line string, err error) {
				kueueImage, line, err = u.loadKueue(sctx, kueueBuild, engine.Arch)
				return line, err
			}},
			{Name: "Installing Kueue", Run: func(sctx context.Context) (string, error) {
				return u.installKueue(sctx, made.kube, kueueImage)
			}},
			{Name: "Waiting for Kueue", Run: func(sctx context.Context) (string, error) {
				return u.waitKueue(sctx, made.kube, kueueImage.Ref)
			}},
			{Name: "Creating the default queues", Run: func(sctx context.Context) (string, error) {
				return applyQueues(sctx, made.kube)
			}},
		}...)
	}
	all = append(all, []steps.Step{
		{Name: "Applying the operator manifests", Run: func(sctx context.Context) (string, error) {
			appliedEarly = made.early.applied()
			return u.applyOperatorManifests(sctx, made.kube, in(), appliedEarly.operator)
		}},
		{Name: "Waiting for the operator", Run: func(sctx context.Context) (string, error) {
			return u.waitOperator(sctx, made.kube, in().operatorImage(), appliedEarly.all())
		}},
		// nodeprobe after the operator: its manifests need the operator's namespace and the
		// accelerator ConfigMap it fills.
		{Name: "Applying the nodeprobe manifests", Run: func(sctx context.Context) (string, error) {
			return applyNodeprobeManifests(sctx, made.kube, in(), appliedEarly.nodeprobe)
		}},
		{Name: "Waiting for nodeprobe", Run: func(sctx context.Context) (string, error) {
			return u.waitNodeprobe(sctx, made.kube, in().nodeprobeImage(), appliedEarly.all())
		}},
	}...)
	if !opts.NoRegistry {
		all = append(all, steps.Step{Name: "Running the local registry " + registry.Host, Run: func(sctx context.Context) (string, error) {
			return u.runRegistry(sctx, registryImage, made.kube)
		}})
	}
	r := steps.Runner{Out: status, Terminal: steps.IsTerminal(status)}
	if err := r.Run(ctx, all...); err != nil {
		return err
	}
	summary(out, u.cluster, opts, in(), kueueImage)
	return nil
}

// up is what every step of a run knows from the start: the options, the checkout, the cluster.
// What a step learns it returns, and Run hands it to the steps that need it.
type up struct {
	opts    Options
	root    string
	cluster *kindcluster.Cluster
}

func checkDocker(ctx context.Context) (*kindcluster.Engine, string, error) {
	engine, err := kindcluster.CheckDocker(ctx)
	if err != nil {
		return nil, "", err
	}
	return engine, fmt.Sprintf("Docker %s answers", engine.Version), nil
}

// madeCluster is the cluster the creating step made or found: clients connected to it, and, for
// a new cluster, the work done while kind created it (zero for a cluster up found).
type madeCluster struct {
	kube  *cluster.Clients
	early early
}

// createCluster creates the cluster from node's image, unless it exists (useCluster). Meanwhile
// it starts the early work (early.go): our images of version for arch built, loaded and
// applied, in runCtx, which outlives the step.
func (u *up) createCluster(runCtx, ctx context.Context, node nodeImage, version, arch string) (madeCluster, string, error) {
	if node.exists {
		return u.useCluster(ctx)
	}
	cfg, from, err := u.config(node)
	if err != nil {
		return madeCluster{}, "", err
	}
	if !u.opts.NoRegistry {
		if cfg, err = registry.KindConfig(cfg); err != nil {
			return madeCluster{}, "", fmt.Errorf("%s: %w", from, err)
		}
	}
	e := u.startEarly(runCtx, cfg, version, arch)
	if err := u.cluster.Create(cfg, node.ref, u.opts.Wait); err != nil {
		e.abandon()
		return madeCluster{}, "", err
	}
	e.clusterCreated()
	kube, err := cluster.Connect(u.cluster)
	if err != nil {
		return madeCluster{}, "", err
	}
	return madeCluster{kube: kube, early: e}, fmt.Sprintf("Created cluster %s from %s", u.opts.Name, from), nil
}

// useCluster takes the cluster that exists, when it is devctl's and of the shape asked for.
func (u *up) useCluster(ctx context.Context) (madeCluster, string, error) {
	if err := u.cluster.CheckOurs(ctx); err != nil {
		return madeCluster{}, "", err
	}
	if u.opts.Workers > 0 {
		all, err := u.cluster.Nodes()
		if err != nil {
			return madeCluster{}, "", err
		}
		if len(all) != u.opts.Workers+1 {
			return madeCluster{}, "", fmt.Errorf("cluster %s exists with %d node(s); --workers %d asks for %d: --workers shapes a cluster only when up creates it, so delete this one first (devctl down --name %s)", u.opts.Name, len(all), u.opts.Workers, u.opts.Workers+1, u.opts.Name)
		}
	}
	if err := u.cluster.ExportKubeConfig(); err != nil {
		return madeCluster{}, "", fmt.Errorf("writing the kubeconfig context %s: %w", u.cluster.Context(), err)
	}
	kube, err := cluster.Connect(u.cluster)
	if err != nil {
		return madeCluster{}, "", err
	}
	return madeCluster{kube: kube}, fmt.Sprintf("Cluster %s exists", u.opts.Name), nil
}

// config is the kind config of a new cluster of node's image, and where it comes from.
func (u *up) config(node nodeImage) ([]byte, string, error) {
	if u.opts.Workers <= 0 {
		if node.published && u.opts.Config == "" {
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
	cfg, err := multiNodeConfig(u.opts.Workers, dir)
	// The nodes keep their image's own pod network: kindnet on kind's images, flannel on the
	// offline one and on a copy of it standing in for kind's (MLKUBE_PUBLISHED_NODE_IMAGE).
	network := "flannel"
	if kindsOwn(node.ref) {
		network = "kindnet"
	}
	return cfg, fmt.Sprintf("--workers %d (1 control plane, %d workers, %s)", u.opts.Workers, u.opts.Workers, network), err
}

// clusterConfig returns the kind config to create the cluster from and where it came from: the
// --config file, else clusters/kind.yaml of the checkout, else the built-in single-node config.
func clusterConfig(root, flag string, builtin string) ([]byte, string, error) {
	if flag != "" {
		data, err := os.ReadFile(flag)
		if err != nil {
			return nil, "", fmt.Errorf("--config: %w", err)
		}
		return data, flag, nil
	}
	data, err := os.ReadFile(filepath.Join(root, "clusters", "kind.yaml"))
	switch {
	case err == nil:
		return data, "clusters/kind.yaml", nil
	case errors.Is(err, os.ErrNotExist):
		return []byte(builtin), "built-in single-node config", nil
	}
	return nil, "", err
}

// netDir holds, for a multi-node cluster, each node's /etc/cni/net.d.
func netDir(name string) (string, error) {
	dir, err := cache.ClusterDir(name)
	if err != nil {
		return "", fmt.Errorf("no folder for the nodes' network configs: %w", err)
	}
	return filepath.Join(dir, "cni"), nil
}

// multiNodeConfig is kindcluster.MultiNodeConfig, its nodes' folders in dir made empty: a config
// left by an earlier cluster would make a node Ready before its flannel runs.
func multiNodeConfig(workers int, dir string) ([]byte, error) {
	if err := kindcluster.MakeNetDirs(workers, dir); err != nil {
		return nil, err
	}
	return kindcluster.MultiNodeConfig(workers, dir), nil
}

// KindConfig writes the kind config `devctl up --workers` creates a cluster of workers workers
// from, its nodes' network config folders in netDir (made empty) rather than in devctl's cache:
// for hack/bench-up.sh, which times a bare `kind create cluster` of the same shape.
func KindConfig(workers int, netDir string, out io.Writer) error {
	cfg, err := multiNodeConfig(workers, netDir)
	if err != nil {
		return err
	}
	_, err = out.Write(cfg)
	return err
}

// summary says what runs in cluster c after a run of opts: what in installed, Kueue's image
// (nil without --kueue), the registry.
func summary(out io.Writer, c *kindcluster.Cluster, opts Options, in install, kueueImage *scripted.Scripted) {
	flag := ""
	if opts.Name != cluster.DefaultName {
		flag = " --name " + opts.Name
	}
	fmt.Fprintf(out, "\nmlkube is up on kind cluster %s; kubectl now uses context %s.\n", opts.Name, c.Context())
	fmt.Fprintf(out, "  operator %s, image %s\n", in.version, in.operatorImage())
	fmt.Fprintf(out, "  nodeprobe on every node, image %s (what it found: devctl status%s)\n", in.nodeprobeImage(), flag)
	if kueueImage != nil {
		fmt.Fprintf(out, "  Kueue %s, image %s: ClusterQueue %s, LocalQueue %s in namespace %s; label a job %s: %[4]s to queue it\n",
			kueueImage.Version, kueueImage.Ref, kueue.ClusterQueue, kueue.LocalQueue, kueue.LocalQueueNamespace, kueue.QueueLabel)
	}
	if !opts.NoRegistry {
		fmt.Fprintf(out, "  local registry %s: docker push %[1]s/NAME:TAG, and name that image in a job\n", registry.Host)
	}
	fmt.Fprintf(out, "\nNext:\n  kubectl get mlkube\n  devctl status%s\n  devctl down%s\n", flag, flag)
}
