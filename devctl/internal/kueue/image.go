package kueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/scripts"
)

// image is Kueue's manager as an image: the binary at /manager, where the chart's Deployment runs
// it (command: [/manager]), as images.User (the chart's pod runs as non-root).
var image = images.Image{Name: ImageName, Binary: "manager"}

// Build is Kueue's manager, built: the binary and its image's tag.
type Build struct {
	// Version is Kueue's, as hack/kueue/go.mod pins it (v0.17.0).
	Version string
	// Binary is the path of the manager in devctl's cache.
	Binary string
	// Ref is the image's tag: the version and a hash of what goes into the image.
	Ref string
	// Built says the binary was built in this run, not found in the cache.
	Built bool
}

// BuildBinary runs hack/build-kubernetes.sh kueue, which builds the manager the first time
// (minutes, cold) and prints its path, in a cache outside the clone keyed by the version; its
// progress lines go to progress. The image's tag is computed from the binary, without
// assembling the image: a node that holds the tag needs nothing more.
func BuildBinary(ctx context.Context, root, arch string, progress func(string)) (*Build, error) {
	built := false
	path, err := scripts.Run(ctx, root, "hack/build-kubernetes.sh", []string{"kueue"}, func(line string) {
		if strings.HasPrefix(line, "building ") {
			built = true
		}
		progress(line)
	})
	if err != nil {
		return nil, fmt.Errorf("building Kueue: %w", err)
	}
	binary, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	version := strings.TrimPrefix(filepath.Base(path), "kueue-")
	return &Build{Version: version, Binary: path, Ref: Tag(binary, version, arch), Built: built}, nil
}

// Tag is the image's tag for a binary: mlkube/kueue:VERSION-HASH, HASH the first 12 hex digits
// of a hash of the binary, the architecture and the image's layout.
func Tag(binary []byte, version, arch string) string {
	sum := sha256.New()
	sum.Write(binary)
	fmt.Fprintf(sum, "\x00%s\x00/%s\x00%s", arch, image.Binary, images.User)
	return ImageName + ":" + version + "-" + hex.EncodeToString(sum.Sum(nil))[:12]
}

// Assemble makes the image of the build, tagged b.Ref.
func (b *Build) Assemble(arch string) (v1.Image, error) {
	binary, err := os.ReadFile(b.Binary)
	if err != nil {
		return nil, err
	}
	built, err := images.Assemble(image, binary, arch)
	if err != nil {
		return nil, err
	}
	return built.Img, nil
}

// WriteArchive writes img as a docker-archive under ref, for the nodes' containerd.
func WriteArchive(w io.Writer, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.MultiRefWrite(map[name.Reference]v1.Image{tag: img}, w)
}

// ModuleDir is the folder of Kueue's module at version in the Go module cache, which holds its
// chart (charts/kueue). go mod download in hack/kueue fetches the module when the cache lacks it
// (the build has fetched it, unless the cache was cleaned since); else it answers at once.
func ModuleDir(ctx context.Context, root, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+version)
	cmd.Dir = filepath.Join(root, "hack", "kueue")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", Module, version, info.Error)
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("go mod download %s@%s: %w", Module, version, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s named no folder", Module, version)
	}
	return info.Dir, nil
}

// ChartDir is Kueue's chart in its module's folder.
func ChartDir(moduleDir string) string { return filepath.Join(moduleDir, "charts", "kueue") }
