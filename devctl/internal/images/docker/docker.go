package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
)

// An Image is an image the local Docker engine holds, as a job names it.
type Image struct {
	// Ref is the reference as the job spells it: my-trainer:v1.
	Ref string
	// Name is the reference in full, as containerd and the kubelet spell it:
	// docker.io/library/my-trainer:v1.
	Name string
	// ID is the engine's image ID, the digest of the image's config ("sha256:..."). It names
	// the content: the same ID on a node is the same image, whatever its tags.
	ID string
}

// String is the image for a status line: my-trainer:v1 (image 5b3239894799).
func (img Image) String() string {
	return fmt.Sprintf("%s (image %s)", img.Ref, ShortID(img.ID))
}

// ShortID is an image ID as `docker images` shows it: the first 12 hex digits.
func ShortID(id string) string {
	hex := strings.TrimPrefix(id, "sha256:")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

// FullName is ref in full as containerd stores it and docker save accepts it
// (my-trainer → docker.io/library/my-trainer:latest); false for a reference that cannot be
// loaded: one that does not parse, or one by digest (my-trainer@sha256:...), which names a
// registry's manifest that an archive cannot carry.
func FullName(ref string) (string, bool) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", false
	}
	registry := tag.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io" // how Docker and containerd spell Docker Hub
	}
	return registry + "/" + tag.RepositoryStr() + ":" + tag.TagStr(), true
}

// Loadable gives the full name (FullName) of each of refs worth asking the engine for: not ours
// (devctl up builds and loads mlkube/trainer and the rest itself, and an engine image of the
// same name must not replace them on the nodes), and not by digest.
func Loadable(refs []string) map[string]string {
	out := map[string]string{}
	for _, ref := range refs {
		full, ok := FullName(ref)
		if ok && !isOurs(full) {
			out[ref] = full
		}
	}
	return out
}

// isOurs says whether full names one of the images devctl up builds.
func isOurs(full string) bool {
	for _, img := range ours.All {
		if strings.HasPrefix(full, "docker.io/"+img.Name+":") {
			return true
		}
	}
	return false
}

// InEngine asks the local Docker engine which of refs it holds, in one `docker image inspect`,
// and returns those, in the order of refs. An engine that does not answer is an error; an
// image it lacks is not.
func InEngine(ctx context.Context, refs []string) ([]Image, error) {
	full := Loadable(refs)
	var ask []string
	for _, ref := range refs {
		if f, ok := full[ref]; ok {
			ask = append(ask, f)
		}
	}
	if len(ask) == 0 {
		return nil, nil
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", append([]string{"image", "inspect", "--format", `{{json .RepoTags}} {{.Id}}`}, ask...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && !onlyMissing(stderr.String()) {
		return nil, fmt.Errorf("asking the Docker engine for %s: %v: %s", strings.Join(ask, ", "), err, strings.TrimSpace(stderr.String()))
	}
	found := parseInspect(stdout.String())
	var out []Image
	for _, ref := range refs {
		f, ok := full[ref]
		if !ok {
			continue
		}
		for _, img := range found {
			if img.named(f) {
				out = append(out, Image{Ref: ref, Name: f, ID: img.id})
				break
			}
		}
	}
	return out, nil
}

// inspected is one image `docker image inspect` printed: its tags and its ID.
type inspected struct {
	tags []string
	id   string
}

func (i inspected) named(full string) bool {
	for _, t := range i.tags {
		if ours.SameRef(t, full) {
			return true
		}
	}
	return false
}

// parseInspect reads the lines of `docker image inspect --format '{{json .RepoTags}} {{.Id}}'`.
func parseInspect(out string) []inspected {
	var found []inspected
	for _, line := range strings.Split(out, "\n") {
		tags, id, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(id, "sha256:") {
			continue
		}
		var i inspected
		if json.Unmarshal([]byte(tags), &i.tags) != nil {
			continue
		}
		i.id = id
		found = append(found, i)
	}
	return found
}

// onlyMissing says whether every line of docker's stderr says an image is missing, the one
// failure that is an answer.
func onlyMissing(stderr string) bool {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
		if !strings.Contains(strings.ToLower(l), "no such image") {
			return false
		}
	}
	return len(lines) > 0
}

// Save writes imgs as one docker-archive, the format `ctr images import` reads, with
// `docker save`, each under its full name.
func Save(ctx context.Context, w io.Writer, imgs []Image) error {
	args := []string{"save"}
	for _, img := range imgs {
		args = append(args, img.Name)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Has says whether the engine holds ref.
func Has(ctx context.Context, ref string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", ref).Run() == nil
}

// Load gives the engine the docker-archive that write writes, with `docker load`.
func Load(ctx context.Context, write func(io.Writer) error) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", "load", "-q")
	r, w := io.Pipe()
	cmd.Stdin, cmd.Stderr = r, &stderr
	go func() { w.CloseWithError(write(w)) }()
	err := cmd.Run()
	r.Close()
	if err != nil {
		return fmt.Errorf("docker load: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Events sends on the returned channel each time the engine's images change (a build, tag,
// pull, load or removal), until ctx ends. It reads `docker events`, so nothing is polled; what
// changed is for the caller to ask (InEngine). A build sends several at once.
func Events(ctx context.Context) (<-chan struct{}, error) {
	cmd := exec.CommandContext(ctx, "docker", "events", "--filter", "type=image", "--format", "{{.Action}}")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("docker events: %w", err)
	}
	events := make(chan struct{})
	go func() {
		defer cmd.Wait() //nolint:errcheck // ends with ctx; nothing to report then
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case events <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return events, nil
}
