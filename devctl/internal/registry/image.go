package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/scripts"
)

// image is the registry's image: Distribution's registry program in /bin, its config beside.
var image = images.Image{Name: "mlkube/registry", Binary: "registry", Dir: "bin"}

// Image builds the registry's image, from the binary hack/build-kubernetes.sh builds (once per
// version, cached outside the clone), and gives it to the local Docker engine unless the engine
// has it: the registry runs as a container of the engine, not in the nodes. The tag is the
// Distribution version and a hash of the image's content. progress hears what the build does.
func Image(ctx context.Context, root, arch string, progress func(string)) (string, error) {
	binPath, err := buildBinary(ctx, root, progress)
	if err != nil {
		return "", err
	}
	version := strings.TrimPrefix(filepath.Base(binPath), "registry-")
	binary, err := os.ReadFile(binPath)
	if err != nil {
		return "", err
	}
	// Tagged by what goes into the image, so that an engine holding the tag needs nothing more,
	// and up spends no time compressing 55 MB to find that out.
	sum := sha256.New()
	sum.Write(binary)
	sum.Write([]byte(config + arch))
	ref, err := name.NewTag(image.Name + ":" + version + "-" + hex.EncodeToString(sum.Sum(nil))[:12])
	if err != nil {
		return "", err
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", ref.String()).Run() == nil {
		return ref.String(), nil
	}
	b, err := images.Assemble(image, binary, arch, images.File{Path: configPath, Mode: 0o644, Data: []byte(config)})
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

// buildBinary runs hack/build-kubernetes.sh registry, which prints the binary's path last and,
// while it builds, a progress line every 15 s on stderr.
func buildBinary(ctx context.Context, root string, progress func(string)) (string, error) {
	path, err := scripts.Run(ctx, root, "hack/build-kubernetes.sh", []string{"registry"}, progress)
	if err != nil {
		return "", fmt.Errorf("building the registry: %w", err)
	}
	return path, nil
}
