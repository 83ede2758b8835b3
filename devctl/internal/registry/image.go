package registry

import (
	"context"
	"fmt"
	"io"
	"os/exec"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mlkube/mlkube/devctl/internal/images"
)

// image is the registry's image: Distribution's registry program in /bin, its config beside.
var image = images.Image{Name: "mlkube/registry", Binary: "registry", Dir: "bin"}

// Image builds the registry's image, from the binary hack/build-kubernetes.sh builds (once per
// version, cached outside the clone), and gives it to the local Docker engine unless the engine
// has it: the registry runs as a container of the engine, not in the nodes. The tag is the
// Distribution version and a hash of the image's content. progress hears what the build does.
func Image(ctx context.Context, root, arch string, progress func(string)) (string, error) {
	s, err := images.BuildScripted(ctx, root, "registry", image, []images.File{{Path: configPath, Mode: 0o644, Data: []byte(config)}}, arch, progress)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(s.Ref)
	if err != nil {
		return "", err
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", ref.String()).Run() == nil {
		return ref.String(), nil
	}
	b, err := s.Assemble(arch)
	if err != nil {
		return "", err
	}
	progress("docker load " + ref.String())
	cmd := exec.CommandContext(ctx, "docker", "load", "-q")
	r, w := io.Pipe()
	cmd.Stdin = r
	go func() { w.CloseWithError(tarball.Write(ref, b.Img, w)) }()
	if out, err := cmd.CombinedOutput(); err != nil {
		r.Close()
		return "", fmt.Errorf("docker load of the registry's image: %s", firstLine(out, err))
	}
	return ref.String(), nil
}
