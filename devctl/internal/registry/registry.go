// Package registry is the local image registry devctl runs beside its kind clusters, the way kind
// documents it: one registry container on Docker's "kind" network, which the host reaches at
// localhost:5001 and every node reaches under the same name (containerd's hosts.toml maps it to
// the container), announced in the cluster by the local-registry-hosting ConfigMap of KEP-1755,
// where Tilt, Skaffold and ctlptl look for it.
//
// The registry is CNCF Distribution's, built from Go modules (hack/registry/go.mod) into an
// image of ours, as no registry can be pulled from here. One registry serves every devctl
// cluster on the machine; its images live in a Docker volume, so they outlive the container, a
// new image of it, and every cluster.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// What the registry is called, where.
const (
	// Host is the registry's name for the host and for the nodes alike: push to
	// localhost:5001/my-trainer:v1 and name that image in a job.
	Host = "localhost:5001"
	// Container is the registry's container, and its name on the kind network.
	Container = "mlkube-registry"
	// Volume holds the registry's images.
	Volume = "mlkube-registry-data"
	// Network is the Docker network kind puts its nodes on.
	Network = "kind"
	// label marks the container as devctl's: a container of that name without it is left alone.
	label = "io.mlkube.registry"
	// port is the registry's port inside its container, on the kind network.
	port = "5000"
	// ConfigPath is where the registry's image holds its config (ConfigFile).
	ConfigPath = "/etc/distribution/config.yml"
)

// InNetwork is how the nodes' containerd reaches the registry: the container by name, on the
// kind network.
const InNetwork = Container + ":" + port

// ConfigFile is the registry's config: images on the volume, deletes allowed (to free space), and only
// warnings logged.
const ConfigFile = `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: true
http:
  addr: :` + port + `
`

// A State is what Ensure found and did.
type State string

const (
	Running   State = "running"
	Started   State = "started"
	Restarted State = "started again, stopped before"
	Replaced  State = "started on a new image"
)

// Ensure makes the registry container run image ref with its volume, published on the host's
// localhost:5001, and waits until it answers there. A running container of another image is
// replaced; the volume, and so every image pushed, stays.
func Ensure(ctx context.Context, ref string) (State, error) {
	c, err := inspect(ctx)
	if err != nil {
		return "", err
	}
	state := Started
	switch {
	case c == nil:
	case c.Config.Labels[label] == "":
		return "", fmt.Errorf("a container named %s exists that devctl did not make: remove it (docker rm -f %[1]s) or rename it, and run devctl up again", Container)
	case c.Config.Image != ref:
		if err := docker(ctx, "rm", "-f", Container); err != nil {
			return "", err
		}
		state = Replaced
	case c.State.Running:
		state = Running
	default:
		if err := docker(ctx, "start", Container); err != nil {
			return "", fmt.Errorf("starting the registry container: %w", err)
		}
		state = Restarted
	}
	if state == Started || state == Replaced {
		// As root: the volume's folder is root's when Docker makes it, and the registry writes there.
		err := docker(ctx, "run", "-d", "--name", Container, "--label", label+"=1", "--restart", "unless-stopped",
			"--user", "0:0", "-p", "127.0.0.1:5001:"+port, "-v", Volume+":/var/lib/registry", ref, "serve", ConfigPath)
		if err != nil {
			return "", fmt.Errorf("starting the registry container on localhost:5001: %w (another program may hold port 5001: `ss -ltnp 'sport = 5001'` names it)", err)
		}
	}
	if err := waitAnswer(ctx, 20*time.Second); err != nil {
		return "", err
	}
	return state, nil
}

// Connect puts the registry container on the kind network, where the nodes reach it by name; the
// network exists once kind has made a cluster.
func Connect(ctx context.Context) error {
	c, err := inspect(ctx)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("no registry container %s", Container)
	}
	if _, ok := c.NetworkSettings.Networks[Network]; ok {
		return nil
	}
	if err := docker(ctx, "network", "connect", Network, Container); err != nil {
		return fmt.Errorf("connecting the registry to the kind network: %w", err)
	}
	return nil
}

// Remove deletes the registry container and, with data, its volume; it reports what there was.
func Remove(ctx context.Context, data bool) (container, volume bool, err error) {
	c, err := inspect(ctx)
	if err != nil {
		return false, false, err
	}
	if c != nil {
		if c.Config.Labels[label] == "" {
			return false, false, fmt.Errorf("the container %s is not devctl's registry: left alone", Container)
		}
		if err := docker(ctx, "rm", "-f", Container); err != nil {
			return false, false, err
		}
	}
	if !data {
		return c != nil, false, nil
	}
	if out, err := exec.CommandContext(ctx, "docker", "volume", "inspect", Volume).CombinedOutput(); err != nil {
		if strings.Contains(strings.ToLower(string(out)), "no such volume") {
			return c != nil, false, nil
		}
		return c != nil, false, fmt.Errorf("docker volume inspect %s: %s", Volume, firstLine(out, err))
	}
	if err := docker(ctx, "volume", "rm", Volume); err != nil {
		return c != nil, false, err
	}
	return c != nil, true, nil
}

// A Report is what Look finds.
type Report struct {
	// Exists and Running say whether there is a registry container and it runs.
	Exists, Running bool
	// Image is the image it runs.
	Image string
	// Repositories are those the registry holds; nil when it does not answer.
	Repositories []string
	// Err says why the registry did not answer, while it runs.
	Err error
}

// Look reports on the registry: its container, and what it holds.
func Look(ctx context.Context) (*Report, error) {
	c, err := inspect(ctx)
	if err != nil || c == nil || c.Config.Labels[label] == "" {
		return &Report{}, err
	}
	r := &Report{Exists: true, Running: c.State.Running, Image: c.Config.Image}
	if r.Running {
		r.Repositories, r.Err = Catalog(ctx)
	}
	return r, nil
}

// Catalog lists the repositories the registry holds, asking it at localhost:5001.
func Catalog(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The registry pages its catalog; a local registry with more repositories than one page of a
	// thousand is beyond what devctl reports.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+Host+"/v2/_catalog?n=1000", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the registry does not answer at %s: %w", Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("the registry at %s answers %s: %s", Host, resp.Status, strings.TrimSpace(string(body)))
	}
	var catalog struct {
		Repositories []string `json:"repositories"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&catalog); err != nil {
		return nil, fmt.Errorf("reading the registry's catalog: %w", err)
	}
	// Empty, not nil: nil says the registry did not answer (Report.Repositories).
	return append([]string{}, catalog.Repositories...), nil
}

// CountRepositories counts them in words, as devctl's lines about the registry say it: "1
// repository", "2 repositories".
func CountRepositories(n int) string {
	if n == 1 {
		return "1 repository"
	}
	return fmt.Sprintf("%d repositories", n)
}

// waitAnswer waits until the registry answers its API's base endpoint on the host.
func waitAnswer(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := Catalog(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the registry container runs but does not answer at %s after %s: %w (its log: docker logs %s)", Host, limit, err, Container)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// container is what docker inspect tells of the registry container that devctl reads.
type container struct {
	Config struct {
		Image  string
		Labels map[string]string
	}
	State struct {
		Running bool
	}
	NetworkSettings struct {
		Networks map[string]json.RawMessage
	}
}

// inspect returns the registry container, or nil when there is none.
func inspect(ctx context.Context) (*container, error) {
	out, err := exec.CommandContext(ctx, "docker", "container", "inspect", Container).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(strings.ToLower(string(ee.Stderr)), "no such") {
			return nil, nil
		}
		return nil, fmt.Errorf("docker container inspect %s: %s", Container, firstLine(exitStderr(err), err))
	}
	var cs []container
	if err := json.Unmarshal(out, &cs); err != nil || len(cs) != 1 {
		return nil, fmt.Errorf("reading docker container inspect %s: %v", Container, err)
	}
	return &cs[0], nil
}

func docker(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %s", args[0], firstLine(out, err))
	}
	return nil
}

func exitStderr(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

func firstLine(out []byte, err error) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return err.Error()
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}
