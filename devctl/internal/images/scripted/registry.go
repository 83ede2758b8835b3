package scripted

import (
	"context"
	"fmt"
	"io"

	"github.com/mlkube/mlkube/devctl/internal/images/docker"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/registry"
)

// registryImage is the registry's image: Distribution's registry program in /bin, its config
// beside.
var registryImage = ours.Image{Name: "mlkube/registry", Binary: "registry", Dir: "bin"}

// Registry builds the registry's image, from the binary hack/build-kubernetes.sh builds (once per
// version, cached outside the clone), and gives it to the local Docker engine unless the engine
// has it: the registry runs as a container of the engine, not in the nodes. The tag is the
// Distribution version and a hash of the image's content. progress hears what the build does.
func Registry(ctx context.Context, root, arch string, progress func(string)) (string, error) {
	s, err := Build(ctx, root, "registry", registryImage, []ours.File{{Path: registry.ConfigPath, Mode: 0o644, Data: []byte(registry.ConfigFile)}}, arch, progress)
	if err != nil {
		return "", err
	}
	if docker.Has(ctx, s.Ref) {
		return s.Ref, nil
	}
	progress("docker load " + s.Ref)
	if err := docker.Load(ctx, func(w io.Writer) error { return s.WriteArchive(w, arch) }); err != nil {
		return "", fmt.Errorf("the registry's image: %w", err)
	}
	return s.Ref, nil
}
