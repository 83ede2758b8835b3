// Package kindcluster is devctl's view of a kind cluster: create it, tell whether one of a name
// exists and is ours, list its nodes, load images into them, delete it. Everything goes through
// the kind Go library with its Docker provider.
package kindcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/constants"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	"sigs.k8s.io/kind/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
)

// DefaultConfig is the cluster config when the repository has none: one node, and no kindnet
// (its image cannot be had offline), so the node image brings its own CNI config.
const DefaultConfig = `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true
nodes:
- role: control-plane
`

// PublishedConfig is the config of a one-node cluster on kind's published node image: its pod
// network is the image's own, kindnet.
const PublishedConfig = `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
`

// MultiNodeConfig is the config of a cluster of one control plane and workers worker nodes, its
// pod network the node image's own: kind applies the image's default CNI manifest when
// disableDefaultCNI is unset, flannel in the offline image, kindnet in kind's published one.
// The offline node image also carries the one-node clusters' static bridge
// config in /etc/cni/net.d, which on several nodes would give pods the same addresses on each; so
// each node gets an empty folder of its own from netDir over /etc/cni/net.d, into which flannel
// writes its config once it runs, and until then the node is NotReady, as in any cluster.
func MultiNodeConfig(workers int, netDir string) []byte {
	var b strings.Builder
	b.WriteString("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n")
	for i := 0; i <= workers; i++ {
		role := "worker"
		if i == 0 {
			role = "control-plane"
		}
		fmt.Fprintf(&b, "- role: %s\n  extraMounts:\n  - hostPath: %s\n    containerPath: /etc/cni/net.d\n", role, nodeNetDir(netDir, i))
	}
	return []byte(b.String())
}

// MakeNetDirs makes the folders MultiNodeConfig(workers, netDir) mounts, each empty.
func MakeNetDirs(workers int, netDir string) error {
	for i := 0; i <= workers; i++ {
		dir := nodeNetDir(netDir, i)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// nodeNetDir is the folder in netDir that is node i's /etc/cni/net.d; node 0 is the control plane.
func nodeNetDir(netDir string, i int) string {
	return filepath.Join(netDir, fmt.Sprintf("node-%d", i))
}

// ConfigNodes is how many nodes a cluster of this kind config has: one when it lists none, as
// kind makes it.
func ConfigNodes(config []byte) (int, error) {
	var c v1alpha4.Cluster
	if err := yaml.Unmarshal(config, &c); err != nil {
		return 0, fmt.Errorf("reading the kind config: %w", err)
	}
	return max(len(c.Nodes), 1), nil
}

// marker is the file devctl leaves on every node it creates: a cluster of the same name without it
// was made by someone else, and devctl leaves it alone.
const marker = "/kind/devctl"

// Cluster is the kind cluster called Name.
type Cluster struct {
	Name     string
	provider *cluster.Provider
	// marked are the nodes that Mark marked, by name.
	mu     sync.Mutex
	marked map[string]bool
}

// New returns the cluster called name; kind reports its progress through logger.
func New(name string, logger log.Logger) *Cluster {
	return &Cluster{
		Name:     name,
		provider: cluster.NewProvider(cluster.ProviderWithLogger(logger), cluster.ProviderWithDocker()),
	}
}

// Context is the name of the kubeconfig context kind writes for the cluster.
func (c *Cluster) Context() string { return "kind-" + c.Name }

// Exists reports whether any node container of the cluster exists, running or not.
func (c *Cluster) Exists() (bool, error) {
	names, err := c.provider.List()
	if err != nil {
		return false, fmt.Errorf("listing kind clusters: %w", err)
	}
	for _, n := range names {
		if n == c.Name {
			return true, nil
		}
	}
	return false, nil
}

// CheckRunning returns nil when every node container of the existing cluster runs, and an error
// that says what to do otherwise.
func (c *Cluster) CheckRunning(ctx context.Context) error {
	all, err := c.provider.ListNodes(c.Name)
	if err != nil {
		return fmt.Errorf("listing the nodes of cluster %s: %w", c.Name, err)
	}
	for _, n := range all {
		running, err := containerRunning(ctx, n.String())
		if err != nil {
			return err
		}
		if !running {
			return fmt.Errorf("the node container %[1]s of cluster %[2]s exists but is stopped: start it with `docker start %[1]s`, or delete the cluster with `devctl down --name %[2]s`", n, c.Name)
		}
	}
	return nil
}

// CheckOurs returns nil when every node of the existing cluster is running and carries devctl's
// marker, and an error that says what to do otherwise.
func (c *Cluster) CheckOurs(ctx context.Context) error {
	if err := c.CheckRunning(ctx); err != nil {
		return err
	}
	all, err := c.provider.ListNodes(c.Name)
	if err != nil {
		return fmt.Errorf("listing the nodes of cluster %s: %w", c.Name, err)
	}
	for _, n := range all {
		out, err := kindexec.Output(n.Command("sh", "-c", "test -e "+marker+" && echo yes || echo no"))
		if err != nil {
			return fmt.Errorf("looking for devctl's marker on node %s: %w", n, runErrorOutput(err))
		}
		if strings.TrimSpace(string(out)) != "yes" {
			return fmt.Errorf("a kind cluster named %[1]s exists but devctl did not make it (node %[2]s has no %[3]s): delete it with `devctl down --name %[1]s`, or pick another name with --name", c.Name, n, marker)
		}
	}
	return nil
}

// Create creates the cluster from a kind config (nodeImage, when set, overrides the config's),
// waits up to wait for the control plane, writes the kubeconfig context and marks the nodes as
// devctl's.
func (c *Cluster) Create(config []byte, nodeImage string, wait time.Duration) error {
	opts := []cluster.CreateOption{
		cluster.CreateWithRawConfig(config),
		cluster.CreateWithWaitForReady(wait),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	}
	if nodeImage != "" {
		opts = append(opts, cluster.CreateWithNodeImage(nodeImage))
	}
	if err := c.provider.Create(c.Name, opts...); err != nil {
		return fmt.Errorf("creating cluster %s: %w", c.Name, runErrorOutput(err))
	}
	all, err := c.provider.ListNodes(c.Name)
	if err != nil {
		return err
	}
	// Every node at once: each is a docker exec, and they add up on a cluster of several nodes.
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		c.mu.Lock()
		done := c.marked[n.String()]
		c.mu.Unlock()
		if !done {
			wg.Go(func() { errs[i] = c.Mark(n) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Mark leaves devctl's marker on node n of a cluster being created. Create marks every node
// that Mark has not marked yet.
func (c *Cluster) Mark(n nodes.Node) error {
	content := fmt.Sprintf("created by devctl at %s", time.Now().UTC().Format(time.RFC3339))
	if err := n.Command("sh", "-c", `echo "$1" > "$2"`, "mark", content, marker).Run(); err != nil {
		return fmt.Errorf("marking node %s as devctl's (delete the cluster with `devctl down --name %s` and retry): %w", n, c.Name, runErrorOutput(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.marked == nil {
		c.marked = map[string]bool{}
	}
	c.marked[n.String()] = true
	return nil
}

// Delete deletes the cluster and the kubeconfig entries kind wrote for it (those also when the
// cluster is gone already); it reports whether there was a cluster to delete.
func (c *Cluster) Delete() (bool, error) {
	exists, err := c.Exists()
	if err != nil {
		return false, err
	}
	if err := c.provider.Delete(c.Name, ""); err != nil {
		return exists, fmt.Errorf("deleting cluster %s: %w", c.Name, runErrorOutput(err))
	}
	return exists, nil
}

// ExportKubeConfig writes the cluster's context into the user's kubeconfig and makes it current,
// as creating the cluster did.
func (c *Cluster) ExportKubeConfig() error {
	return c.provider.ExportKubeConfig(c.Name, "", false)
}

// RESTConfig is a client config for the cluster from the kubeconfig kind keeps, whatever the
// user's current context is.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	kubeconfig, err := c.provider.KubeConfig(c.Name, false)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig of cluster %s: %w", c.Name, runErrorOutput(err))
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "devctl"
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Nodes lists the cluster's Kubernetes nodes (the containers, not the API objects).
func (c *Cluster) Nodes() ([]nodes.Node, error) {
	all, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of cluster %s: %w", c.Name, err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("cluster %s has no nodes", c.Name)
	}
	return all, nil
}

// Images lists the image references the node's containerd holds for Kubernetes.
func Images(n nodes.Node) ([]string, error) {
	lines, err := kindexec.OutputLines(n.Command("ctr", "--namespace=k8s.io", "images", "list", "-q"))
	if err != nil {
		return nil, fmt.Errorf("listing the images on node %s: %w", n, runErrorOutput(err))
	}
	return lines, nil
}

// NodeImages lists the images the node's containerd holds for Kubernetes, by reference, with
// the manifest digest each names. Besides every tag, containerd's CRI keeps a reference
// "sha256:<image ID>" to each image (ours.ParseList keeps those too), so the list also tells
// which image ID a tag names.
func NodeImages(n nodes.Node) (map[string]string, error) {
	lines, err := kindexec.OutputLines(n.Command("ctr", "--namespace=k8s.io", "images", "list"))
	if err != nil {
		return nil, fmt.Errorf("listing the images on node %s: %w", n, runErrorOutput(err))
	}
	return ours.ParseList(lines), nil
}

// PodNodes are the nodes our pods can run on: with workers, the workers alone, as kind taints
// the control plane of a cluster that has them; else the one control plane. Images for pods go
// only there.
func PodNodes(all []nodes.Node) []nodes.Node {
	return podNodes(all, func(n nodes.Node) string {
		role, _ := n.Role()
		return role
	})
}

// podNodes is PodNodes' choice among nodes of any form, given their roles.
func podNodes[N any](all []N, role func(N) string) []N {
	var workers, others []N
	for _, n := range all {
		switch role(n) {
		case constants.WorkerNodeRoleValue:
			workers = append(workers, n)
		case constants.ExternalLoadBalancerNodeRoleValue, constants.ExternalEtcdNodeRoleValue:
			// no pods there
		default:
			others = append(others, n)
		}
	}
	if len(workers) == 0 {
		return others
	}
	return workers
}

// A NodeContainer is a node as Docker runs it.
type NodeContainer struct {
	// ID is the container's full ID: a node created again under the same name has another.
	ID, Name, Role string
}

// The labels kind puts on its node containers (its docker provider's, unexported).
const (
	clusterLabel = "io.x-k8s.kind.cluster"
	roleLabel    = "io.x-k8s.kind.role"
)

// PodNodeContainers are the running containers of PodNodes' choice, from one docker ps: what
// listing the nodes and asking each its role would tell, at a fraction of the cost.
func (c *Cluster) PodNodeContainers(ctx context.Context) ([]NodeContainer, error) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "--no-trunc", "--filter", "label="+clusterLabel+"="+c.Name,
		"--format", "{{.ID}}\t{{.Names}}\t{{.Label \""+roleLabel+"\"}}").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of cluster %s: %s", c.Name, firstLine(out, err))
	}
	var all []NodeContainer
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 {
			all = append(all, NodeContainer{ID: f[0], Name: f[1], Role: f[2]})
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("cluster %s has no running nodes", c.Name)
	}
	return podNodes(all, func(n NodeContainer) string { return n.Role }), nil
}

// LoadArchive imports a docker-archive file into the node's containerd.
func LoadArchive(n nodes.Node, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := nodeutils.LoadImageArchive(n, f); err != nil {
		return fmt.Errorf("loading images into node %s: %w", n, runErrorOutput(err))
	}
	return nil
}

// everyNodeRuns matches the preloaded images that every node runs once it joins: the pod
// sandbox, kube-proxy and, in a cluster of several nodes, flannel (a single node unpacks its
// 53 MB layer for nothing; the Debian base below it, 112 MB, is kube-proxy's too).
const everyNodeRuns = `/(pause|kube-proxy|flannel):`

// UnpackPreloaded unpacks, on node n, the images of the node image that every node runs. The
// node image holds them packed, as kind's own does, and a node unpacks an image the first time it
// creates one of its containers: on a busy 2-core host that took a new worker 20 s after it
// joined, which it spent not Ready. Unpacked beforehand, they start at once.
func UnpackPreloaded(n nodes.Node) error {
	script := `for ref in $(ctr -n k8s.io images list -q | grep -E "$1"); do
  d=$(mktemp -d) && ctr -n k8s.io images mount "$ref" "$d" >/dev/null && ctr -n k8s.io images unmount --rm "$d" >/dev/null || exit 1
  rmdir "$d"
done`
	if err := n.Command("sh", "-c", script, "unpack", everyNodeRuns).Run(); err != nil {
		return fmt.Errorf("unpacking the preloaded images on node %s: %w", n, runErrorOutput(err))
	}
	return nil
}

// Engine is the Docker engine that runs the nodes.
type Engine struct {
	Version string
	// Arch is the engine's architecture as a GOARCH, what our binaries are built for.
	Arch string
}

// CheckDocker asks the Docker engine for its version; the error says how to get one running.
func CheckDocker(ctx context.Context) (*Engine, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, errors.New("no docker command found: install Docker (the CLI and an engine), then retry")
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}} {{.Architecture}}").CombinedOutput()
	fields := strings.Fields(string(out))
	if err != nil || len(fields) != 2 {
		return nil, fmt.Errorf("no Docker engine answers: start Docker, or run `hack/docker.sh start` on a machine without one (docker info: %s)", firstLine(out, err))
	}
	return &Engine{Version: fields[0], Arch: goarch(fields[1])}, nil
}

// goarch maps what the engine reports (uname -m) to Go's name for it.
func goarch(machine string) string {
	switch machine {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	}
	return machine
}

func containerRunning(ctx context.Context, container string) (bool, error) {
	out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{.State.Running}}", container).CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("inspecting node container %s: %s", container, firstLine(out, err))
	}
	return strings.TrimSpace(string(out)) == "true", nil
}

// runErrorOutput adds the output of a failed command run by kind, which its error leaves out.
func runErrorOutput(err error) error {
	var re *kindexec.RunError
	if errors.As(err, &re) && len(strings.TrimSpace(string(re.Output))) > 0 {
		return fmt.Errorf("%w\n%s", err, strings.TrimSpace(string(re.Output)))
	}
	return err
}

func firstLine(out []byte, err error) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		if err == nil {
			return "no answer"
		}
		return err.Error()
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}
