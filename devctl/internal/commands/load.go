package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/images/docker"
	"github.com/mlkube/mlkube/devctl/internal/images/load"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Images from the local Docker engine into the nodes: `devctl load` by hand, and `devctl run`
// for the images its job names (an image made by `docker build` is in the engine, and a pod
// naming it would wait in ErrImagePull for ever). Both ship them the way `devctl up` ships ours:
// one archive, loaded into every pod node that lacks an image, all nodes at once.

// loadPlan loads what plan says the pod nodes lack, from the engine, remembers what the nodes
// then hold in mem (pods are their containers; a nil mem remembers nothing), and ends the step
// with what it did.
func loadPlan(ctx context.Context, plan *docker.Plan, mem *docker.Memory, pods []kindcluster.NodeContainer) (string, error) {
	mem.Learn(pods, plan)
	if len(plan.Load) == 0 {
		remember(ctx, mem)
		return fmt.Sprintf("%s already on the %s", list(plan.Local), nodesWord(plan.PodNodes)), nil
	}
	save := func(w io.Writer) error { return docker.Save(ctx, w, plan.Load) }
	var refs, names []string
	for _, img := range plan.Load {
		refs = append(refs, img.Ref)
	}
	for _, n := range plan.Nodes {
		names = append(names, n.String())
	}
	if err := load.Archive(ctx, refs, save, plan.Nodes); err != nil {
		remember(ctx, mem)
		return "", err
	}
	mem.Loaded(pods, names, plan.Load)
	remember(ctx, mem)
	return fmt.Sprintf("Loaded %s from Docker into %d node(s)", list(plan.Load), len(plan.Nodes)), nil
}

// remember saves mem; failing costs only a listing of the nodes next time, so it is a line.
func remember(ctx context.Context, mem *docker.Memory) {
	if err := mem.Save(); err != nil {
		steps.From(ctx).Printf("not remembering what the nodes hold: %v", err)
	}
}

// loadedMemory is what devctl remembers of the images in cluster's nodes (docker.Memory);
// nil without a cache directory.
func loadedMemory(cluster string) *docker.Memory {
	dir, err := cache.Dir()
	if err != nil {
		return nil
	}
	return docker.OpenMemory(filepath.Join(dir, "loaded", cluster+".json"))
}

func list(imgs []docker.Image) string {
	var s []string
	for _, img := range imgs {
		s = append(s, img.String())
	}
	return strings.Join(s, ", ")
}

func nodesWord(n int) string {
	if n == 1 {
		return "node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// LoadOptions are the settings of `devctl load`.
type LoadOptions struct {
	// Name is the kind cluster's name.
	Name string
	// Images are references as a pod names them: my-trainer:v1.
	Images []string
}

// Load loads the images from the local Docker engine into the pod nodes of the cluster that
// lack them. An image the engine lacks, or that devctl up makes, is a usage error.
func Load(ctx context.Context, o LoadOptions, status io.Writer) error {
	if err := loadable(o.Images); err != nil {
		return UsageError(err)
	}
	c := kindcluster.New(o.Name, kindcmd.NewLogger())
	r := steps.Runner{Out: status, Terminal: steps.IsTerminal(status)}
	return r.Run(ctx,
		steps.Step{Name: "Checking Docker and cluster " + o.Name, Run: func(ctx context.Context) (string, error) {
			engine, err := kindcluster.CheckDocker(ctx)
			if err != nil {
				return "", err
			}
			exists, err := c.Exists()
			if err != nil {
				return "", err
			}
			if !exists {
				return "", fmt.Errorf("no kind cluster named %[1]s: devctl up --name %[1]s makes one, or --name names another", o.Name)
			}
			if err := c.CheckRunning(ctx); err != nil {
				return "", err
			}
			return fmt.Sprintf("Docker %s answers; cluster %s runs", engine.Version, o.Name), nil
		}},
		steps.Step{Name: "Loading images from Docker into the nodes", Run: func(ctx context.Context) (string, error) {
			plan, err := docker.Check(ctx, c, o.Images)
			if err != nil {
				return "", err
			}
			if err := notInEngine(o.Images, plan.Local); err != nil {
				return "", UsageError(err)
			}
			pods, err := c.PodNodeContainers(ctx)
			if err != nil {
				return "", err
			}
			return loadPlan(ctx, plan, loadedMemory(o.Name), pods)
		}},
	)
}

// loadable refuses what devctl load cannot load: a reference that does not parse or is by
// digest, and our own images.
func loadable(refs []string) error {
	ok := docker.Loadable(refs)
	var errs []error
	for _, ref := range refs {
		if _, fine := ok[ref]; fine {
			continue
		}
		if full, parses := docker.FullName(ref); parses {
			errs = append(errs, fmt.Errorf("%s is devctl's own image (%s): devctl up builds it from the checkout and loads it", ref, full))
		} else {
			errs = append(errs, fmt.Errorf("%s: not an image reference devctl can load: give it as a pod names it, with a tag (my-trainer:v1), not by digest", ref))
		}
	}
	return errors.Join(errs...)
}

// notInEngine is the error for refs the engine does not hold.
func notInEngine(refs []string, local []docker.Image) error {
	var errs []error
	for _, ref := range refs {
		found := false
		for _, img := range local {
			found = found || img.Ref == ref
		}
		if !found {
			errs = append(errs, fmt.Errorf("%[1]s is not in the local Docker engine (docker images does not list it): build it (docker build -t %[1]s .) or pull it (docker pull %[1]s)", ref))
		}
	}
	return errors.Join(errs...)
}

// jobImages are what run knows of its job's images in a kind cluster: the refs the last check
// asked about and the image ID the engine had for each ("" for none), which --watch compares
// the engine's with.
type jobImages struct {
	refs []string
	seen map[string]string
}

// imageCheck is the check of a job's images against a kind cluster's pod nodes, in two parts
// that run in the background: glance, docker.Glance; then plan, when the engine holds any of
// the images, the listing of the nodes (an empty plan when it holds none).
type imageCheck struct {
	cluster *kindcluster.Cluster
	memory  *docker.Memory
	uses    []docker.Use
	refs    []string

	glance *steps.Background[glance]
	plan   *steps.Background[*docker.Plan]
}

// glance is what docker.Glance finds: the job's images the engine holds, and the pod nodes'
// containers.
type glance struct {
	local []docker.Image
	pods  []kindcluster.NodeContainer
}

// checkImages starts checking the images of job against the kind cluster of the kubeconfig
// context kubeContext (kind-<name>); nil for a context of no kind cluster, whose images devctl
// cannot load. It runs while run connects and validates, so that it adds nothing to run's time
// unless there is something to load.
func checkImages(ctx context.Context, kubeContext string, job client.Object) *imageCheck {
	name, ok := strings.CutPrefix(kubeContext, "kind-")
	j, isJob := job.(v1beta1.Job)
	if !ok || !isJob {
		return nil
	}
	uses := docker.Of(j)
	c := &imageCheck{
		cluster: kindcluster.New(name, kindcmd.NewLogger()), memory: loadedMemory(name),
		uses: uses, refs: docker.Refs(uses),
	}
	c.glance = steps.Go(func(func(string)) (glance, error) {
		local, pods, err := docker.Glance(ctx, c.cluster, c.refs)
		return glance{local: local, pods: pods}, err
	})
	c.plan = steps.Go(func(func(string)) (*docker.Plan, error) {
		g, err := c.glance.Wait(nil)
		if err != nil || len(g.local) == 0 {
			return &docker.Plan{}, err
		}
		return docker.CheckNodes(ctx, c.cluster, g.local)
	})
	return c
}

// currentContext is the name of the kubeconfig's current context, "" when it cannot be read
// (connecting then says why).
func currentContext() string {
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).RawConfig()
	if err != nil {
		return ""
	}
	return raw.CurrentContext
}

// ensureImages makes sure the pod nodes hold the images of the job that the local Docker engine
// holds, loading what they lack with devctl up's progress lines; nothing is printed when nothing
// is to load. When devctl's memory says every pod node holds them all, it returns at once and the
// listing of the nodes goes on beside the job (lateLoad). A check that failed is one warning
// line: the job may still run (its status says so when it cannot). A load that fails is an error.
func (r *runner) ensureImages(ctx context.Context, c *imageCheck) error {
	if c == nil {
		return nil
	}
	g, err := c.glance.Wait(nil)
	r.local = &jobImages{refs: c.refs, seen: map[string]string{}}
	if err != nil {
		r.say("warning: not loading the job's images from Docker into the nodes: %s", steps.OneLine(err))
		return nil
	}
	for _, img := range g.local {
		r.local.seen[img.Ref] = img.ID
	}
	if len(g.local) == 0 {
		return nil
	}
	r.warnPulled(c, g.local)
	if c.memory.Covers(g.pods, g.local) {
		go r.lateLoad(ctx, c, g.pods)
		return nil
	}
	plan, err := c.plan.Wait(nil)
	if err != nil {
		r.say("warning: not loading the job's images from Docker into the nodes: %s", steps.OneLine(err))
		return nil
	}
	if len(plan.Load) == 0 {
		c.learn(g.pods, plan)
		return nil
	}
	return r.loadSteps(ctx, c, g.pods, plan)
}

// learn remembers what the listing of the nodes (pods are their containers) found; failing
// costs only a listing next time.
func (c *imageCheck) learn(pods []kindcluster.NodeContainer, plan *docker.Plan) {
	c.memory.Learn(pods, plan)
	_ = c.memory.Save()
}

// lateLoad waits for the listing of the nodes that the memory let run skip, and loads what it
// finds missing after all: the kubelet pulls again after its back-off and then finds it.
func (r *runner) lateLoad(ctx context.Context, c *imageCheck, pods []kindcluster.NodeContainer) {
	plan, err := c.plan.Wait(nil)
	if err != nil || ctx.Err() != nil {
		return
	}
	if len(plan.Load) > 0 {
		r.say("warning: %s no longer on the nodes, though devctl had loaded it: loading it again; a pod waiting for it starts once the kubelet tries again", list(plan.Load))
		if err := r.loadSteps(ctx, c, pods, plan); err != nil && ctx.Err() == nil {
			r.say("error: %v", err)
		}
		return
	}
	c.learn(pods, plan)
}

// loadSteps loads what plan says the nodes lack, as a step of its own on the status stream. On
// a terminal its spinner takes the place of the progress line (r.live) while it runs: two lines
// redrawn in place would draw over each other.
func (r *runner) loadSteps(ctx context.Context, c *imageCheck, pods []kindcluster.NodeContainer, plan *docker.Plan) error {
	if r.live != nil {
		defer r.live.Pause()()
	}
	sr := steps.Runner{Out: r.status, Terminal: r.live != nil} // r.live: status is a terminal
	return sr.Run(ctx, steps.Step{Name: "Loading images from Docker into the nodes", Run: func(ctx context.Context) (string, error) {
		return loadPlan(ctx, plan, c.memory, pods)
	}})
}

// warnPulled warns of the job's containers that would pull an image loaded from Docker rather than run
// it: imagePullPolicy Always, which is also the default for :latest.
func (r *runner) warnPulled(c *imageCheck, local []docker.Image) {
	for _, img := range local {
		var where []string
		for _, u := range c.uses {
			if u.Image == img.Ref && u.PullsAlways() {
				where = append(where, u.Where)
			}
		}
		if where != nil {
			r.say("warning: %s is pulled on every start by %s (imagePullPolicy Always, the default for :latest or no tag), so the image loaded from Docker is not used: set imagePullPolicy: IfNotPresent", img.Ref, strings.Join(where, ", "))
		}
	}
}

// imageChanges sends when the engine's images change, for --watch; nil (never) when the job's
// cluster is no kind cluster, or Docker cannot be watched (said once).
func (r *runner) imageChanges(ctx context.Context) <-chan struct{} {
	if r.local == nil {
		return nil
	}
	events, err := docker.Events(ctx)
	if err != nil {
		r.say("warning: --watch does not see images rebuilt in Docker: %s", steps.OneLine(err))
		return nil
	}
	return debounced(ctx, events, r.o.Debounce)
}

// changedImages says which images of the job now have another image ID in the engine than
// when the job was submitted ("my-trainer:v1 (image 5b3239894799 -> 0c1d2e3f4a5b)"); "" when
// none does.
func (r *runner) changedImages(ctx context.Context) string {
	if r.local == nil {
		return ""
	}
	now, err := docker.InEngine(ctx, r.local.refs)
	if err != nil {
		r.say("warning: asking Docker about the job's images: %s", steps.OneLine(err))
		return ""
	}
	var changed []string
	for _, img := range now {
		if was := r.local.seen[img.Ref]; was != img.ID {
			from := "none"
			if was != "" {
				from = docker.ShortID(was)
			}
			changed = append(changed, fmt.Sprintf("%s (image %s -> %s)", img.Ref, from, docker.ShortID(img.ID)))
		}
	}
	return strings.Join(changed, ", ")
}
