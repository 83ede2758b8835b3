// Package up is `devctl up`: the steps that make sure a kind cluster runs the operator and
// nodeprobe built from the checkout's source. Where to look:
//
//   - up.go: the pipeline of steps (Run), the cluster's creation and its kind config;
//   - nodeimage.go: which node image a new cluster gets;
//   - early.go: the work done while kind creates a new cluster (building, loading, applying),
//     which the later steps then report;
//   - ours.go: building our images, or finding them unchanged, and loading them into the nodes;
//   - manifests.go: applying the operator's and nodeprobe's manifests and waiting for them;
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

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/checkout"
	"github.com/mlkube/mlkube/devctl/internal/cluster"
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
func Run(ctx context.Context, opts Options, status, out io.Writer) error {
	root, err := checkout.Root()
	if err != nil {
		return err
	}
	u := &up{opts: opts, root: root, cluster: kindcluster.New(opts.Name, kindcmd.NewLogger()), ctx: ctx, install: install{name: opts.Name}}
	r := steps.Runner{Out: status, Terminal: steps.IsTerminal(status)}
	all := []steps.Step{
		{Name: "Checking Docker", Run: u.checkDocker},
		{Name: "Choosing the node image", Run: u.chooseNodeImage},
		// kind draws its own progress while it creates the cluster.
		{Name: "Creating cluster " + opts.Name, Run: u.createCluster, OwnProgress: true},
		{Name: "Building images", Run: u.buildImages},
		{Name: "Loading images into the nodes", Run: u.loadImages},
	}
	if opts.Kueue {
		// Before the operator: its Kueue integration needs Kueue's CRDs when it starts.
		all = append(all, u.kueueSteps()...)
	}
	all = append(all, []steps.Step{
		{Name: "Applying the operator manifests", Run: u.unlessEarly(func(a *earlyApply) applied { return a.operator }, u.applyOperatorKueue)},
		{Name: "Waiting for the operator", Run: u.waitOperator},
		// nodeprobe after the operator: its manifests need the operator's namespace and the
		// accelerator ConfigMap it fills.
		{Name: "Applying the nodeprobe manifests", Run: u.unlessEarly(func(a *earlyApply) applied { return a.nodeprobe }, u.applyNodeprobe)},
		{Name: "Waiting for nodeprobe", Run: u.waitNodeprobe},
	}...)
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

// up is what the steps learn and leave for the later ones.
type up struct {
	// ctx is Run's: the early work and the registry's image outlive the step that starts them.
	ctx     context.Context
	opts    Options
	root    string
	cluster *kindcluster.Cluster
	engine  *kindcluster.Engine
	// install is what this run installs: the images built and the version (manifests.go).
	install
	kube *cluster.Clients
	// nodes are the cluster's nodes and have, for each, the images it holds (reference →
	// digest), as they were before this run loaded any.
	nodes []nodes.Node
	have  []map[string]string
	// early is the work done while kind created the cluster (early.go); nil when up found the
	// cluster.
	early *early
	// registry is the local registry's image, readied from the start (registry.go).
	registry *steps.Background[string]
	// kueue is Kueue's manager, built from the start with --kueue (kueue.go).
	kueue *steps.Background[*scripted.Scripted]
	// kueueImage is Kueue's manager once built, and its image's tag, for the steps that install
	// and wait for Kueue and for the summary.
	kueueImage *scripted.Scripted
	// published says the node image is kind's published one (nodeimage.go), whose pod network
	// is kindnet.
	published bool
}

func (u *up) checkDocker(ctx context.Context) (string, error) {
	engine, err := kindcluster.CheckDocker(ctx)
	if err != nil {
		return "", err
	}
	u.engine = engine
	if !u.opts.NoRegistry {
		u.readyRegistryImage()
	}
	if u.opts.Kueue {
		u.readyKueue()
	}
	return fmt.Sprintf("Docker %s answers", engine.Version), nil
}

func (u *up) createCluster(ctx context.Context) (string, error) {
	exists, err := u.cluster.Exists()
	if err != nil {
		return "", err
	}
	if exists {
		return u.useCluster(ctx)
	}
	cfg, from, err := u.config()
	if err != nil {
		return "", err
	}
	if !u.opts.NoRegistry {
		if cfg, err = registry.KindConfig(cfg); err != nil {
			return "", fmt.Errorf("%s: %w", from, err)
		}
	}
	u.version = checkout.Version(u.ctx, u.root)
	u.early = u.startEarly(cfg)
	if err := u.cluster.Create(cfg, u.opts.NodeImage, u.opts.Wait); err != nil {
		u.early.abandon()
		return "", err
	}
	u.early.clusterCreated()
	return fmt.Sprintf("Created cluster %s from %s", u.opts.Name, from), nil
}

// useCluster takes the cluster that exists, when it is devctl's and of the shape asked for.
func (u *up) useCluster(ctx context.Context) (string, error) {
	if err := u.cluster.CheckOurs(ctx); err != nil {
		return "", err
	}
	if u.opts.Workers > 0 {
		all, err := u.cluster.Nodes()
		if err != nil {
			return "", err
		}
		if len(all) != u.opts.Workers+1 {
			return "", fmt.Errorf("cluster %s exists with %d node(s); --workers %d asks for %d: --workers shapes a cluster only when up creates it, so delete this one first (devctl down --name %s)", u.opts.Name, len(all), u.opts.Workers, u.opts.Workers+1, u.opts.Name)
		}
	}
	if err := u.cluster.ExportKubeConfig(); err != nil {
		return "", fmt.Errorf("writing the kubeconfig context %s: %w", u.cluster.Context(), err)
	}
	return fmt.Sprintf("Cluster %s exists", u.opts.Name), nil
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
	cfg, err := multiNodeConfig(u.opts.Workers, dir)
	// The nodes keep their image's own pod network: kindnet on kind's images, flannel on the
	// offline one and on a copy of it standing in for kind's (MLKUBE_PUBLISHED_NODE_IMAGE).
	network := "flannel"
	if kindsOwn(u.opts.NodeImage) {
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

func (u *up) summary(out io.Writer) {
	flag := ""
	if u.opts.Name != cluster.DefaultName {
		flag = " --name " + u.opts.Name
	}
	fmt.Fprintf(out, "\nmlkube is up on kind cluster %s; kubectl now uses context %s.\n", u.opts.Name, u.cluster.Context())
	fmt.Fprintf(out, "  operator %s, image %s\n", u.version, u.operatorImage())
	fmt.Fprintf(out, "  nodeprobe on every node, image %s (what it found: devctl status%s)\n", u.nodeprobeImage(), flag)
	if u.kueueImage != nil {
		fmt.Fprintf(out, "  Kueue %s, image %s: ClusterQueue %s, LocalQueue %s in namespace %s; label a job %s: %[4]s to queue it\n",
			u.kueueImage.Version, u.kueueImage.Ref, kueue.ClusterQueue, kueue.LocalQueue, kueue.LocalQueueNamespace, kueue.QueueLabel)
	}
	if u.registry != nil {
		fmt.Fprintf(out, "  local registry %s: docker push %[1]s/NAME:TAG, and name that image in a job\n", registry.Host)
	}
	fmt.Fprintf(out, "\nNext:\n  kubectl get mlkube\n  devctl status%s\n  devctl down%s\n", flag, flag)
}
