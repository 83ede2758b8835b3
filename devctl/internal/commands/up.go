package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/devctl/internal/steps"
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
	// Wait bounds each wait: for the control plane, the operator, nodeprobe.
	Wait time.Duration
}

// Up makes sure a kind cluster runs with the operator and nodeprobe built from the checkout's
// source: each step is skipped when its work is already done, so a second run on an unchanged
// checkout only rebuilds (from Go's cache) and compares. Status lines go to status, the summary
// to out.
func Up(ctx context.Context, opts UpOptions, status, out io.Writer) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	u := &up{opts: opts, root: root, cluster: kindcluster.New(opts.Name, kindcmd.NewLogger())}
	r := steps.Runner{Out: status}
	err = r.Run(ctx,
		steps.Step{Name: "Checking Docker", Run: u.checkDocker},
		steps.Step{Name: "Creating cluster " + opts.Name, Run: u.createCluster},
		steps.Step{Name: "Building images", Run: u.buildImages},
		steps.Step{Name: "Loading images into the nodes", Run: u.loadImages},
		steps.Step{Name: "Applying the operator manifests", Run: u.applyOperator},
		steps.Step{Name: "Waiting for the operator", Run: u.waitOperator},
		// nodeprobe after the operator: its manifests need the operator's namespace and the
		// accelerator ConfigMap it fills.
		steps.Step{Name: "Applying the nodeprobe manifests", Run: u.applyNodeprobe},
		steps.Step{Name: "Waiting for nodeprobe", Run: u.waitNodeprobe},
	)
	if err != nil {
		return err
	}
	u.summary(out)
	return nil
}

type up struct {
	opts    UpOptions
	root    string
	cluster *kindcluster.Cluster
	engine  *kindcluster.Engine
	version string
	built   []*images.Built
	kube    *clients
}

func (u *up) checkDocker(ctx context.Context) error {
	engine, err := kindcluster.CheckDocker(ctx)
	if err != nil {
		return err
	}
	u.engine = engine
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
		if err := u.cluster.ExportKubeConfig(); err != nil {
			return fmt.Errorf("writing the kubeconfig context %s: %w", u.cluster.Context(), err)
		}
		return steps.Done("Cluster %s exists", u.opts.Name)
	}
	cfg, from, err := clusterConfig(u.root, u.opts.Config, kindcluster.DefaultConfig)
	if err != nil {
		return err
	}
	if err := u.cluster.Create(cfg, u.opts.NodeImage, u.opts.Wait); err != nil {
		return err
	}
	return steps.Done("Created cluster %s from %s", u.opts.Name, from)
}

func (u *up) buildImages(ctx context.Context) error {
	u.version = sourceVersion(ctx, u.root)
	opts := images.Options{Dir: u.root, Version: u.version, Arch: u.engine.Arch}
	// At once: on an unchanged checkout each build is mostly its link, one core each, and
	// nodeprobe's (cgo, through the C linker) is the longest.
	built := make([]*images.Built, len(images.Ours))
	errs := make([]error, len(images.Ours))
	var wg sync.WaitGroup
	for i, img := range images.Ours {
		wg.Go(func() { built[i], errs[i] = images.Build(ctx, opts, img) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var refs []string
	for _, b := range built {
		u.built = append(u.built, b)
		refs = append(refs, b.Ref.String())
	}
	return steps.Done("Built %s (version %s)", strings.Join(refs, ", "), u.version)
}

// loadImages loads into each node the images it lacks, under their content tag and the :dev
// alias. The content tag is the image's digest, so a node that lists it has exactly this image;
// the alias must also name the same image, or the node gets the archive again to move it.
func (u *up) loadImages(ctx context.Context) error {
	nodes, err := u.cluster.Nodes()
	if err != nil {
		return err
	}
	var toLoad []*images.Built
	var targets []int
	for i, n := range nodes {
		have, err := nodeImages(n)
		if err != nil {
			return err
		}
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
	if len(targets) == 0 {
		return steps.Done("Images already on the nodes")
	}

	archive, err := os.CreateTemp("", "devctl-images-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(archive.Name())
	if err := images.WriteArchive(archive, toLoad...); err != nil {
		archive.Close()
		return fmt.Errorf("writing the image archive: %w", err)
	}
	if err := archive.Close(); err != nil {
		return err
	}
	for _, i := range targets {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := kindcluster.LoadArchive(nodes[i], archive.Name()); err != nil {
			return err
		}
	}
	var refs []string
	for _, b := range toLoad {
		refs = append(refs, b.Ref.String())
	}
	return steps.Done("Loaded %s (each also as :%s) into %d node(s)", strings.Join(refs, ", "), images.DevTag, len(targets))
}

// nodeImages lists the images the node's containerd holds for Kubernetes, by reference, with
// the digest each names.
func nodeImages(n nodes.Node) (map[string]string, error) {
	lines, err := kindexec.OutputLines(n.Command("ctr", "--namespace=k8s.io", "images", "list"))
	if err != nil {
		return nil, fmt.Errorf("listing the images on node %s: %w", n, err)
	}
	return images.ParseList(lines), nil
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
	applied, err := manifests.Apply(ctx, u.kube, objs)
	if err != nil {
		return err
	}
	if kept {
		return steps.Done("Applied the operator manifests: %s; kept the accelerator config (nodeprobe's)", applied)
	}
	return steps.Done("Applied the operator manifests: %s", applied)
}

// waitOperator waits for the TfJob CRD to be served and the operator Deployment to run the new
// image on every replica; both already true means nothing changed, and there is no wait.
func (u *up) waitOperator(ctx context.Context) error {
	key := client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}
	ready := manifests.All(
		manifests.CRDEstablished(u.kube, tfjobCRD),
		manifests.DeploymentRolledOut(u.kube, key),
	)
	if ok, _, err := ready(ctx); err == nil && ok {
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

func (u *up) operatorImage() string { return u.image("mlkube/operator", operatorDevImage) }

func (u *up) summary(out io.Writer) {
	flag := ""
	if u.opts.Name != DefaultName {
		flag = " --name " + u.opts.Name
	}
	fmt.Fprintf(out, "\nmlkube is up on kind cluster %s; kubectl now uses context %s.\n", u.opts.Name, u.cluster.Context())
	fmt.Fprintf(out, "  operator %s, image %s\n", u.version, u.operatorImage())
	fmt.Fprintf(out, "  nodeprobe on every node, image %s (what it found: devctl status%s)\n", u.image("mlkube/nodeprobe", nodeprobeDevImage), flag)
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
