package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mlkube/mlkube/devctl/internal/images"
)

// image is Kueue's manager as an image: the binary at /manager, where the chart's Deployment runs
// it (command: [/manager]), as images.User (the chart's pod runs as non-root).
var image = images.Image{Name: ImageName, Binary: "manager"}

// BuildImage builds Kueue's manager with hack/build-kubernetes.sh kueue (cached outside the
// clone by version; minutes, cold) and tags its image by its content; progress hears the build.
func BuildImage(ctx context.Context, root, arch string, progress func(string)) (*images.Scripted, error) {
	return images.BuildScripted(ctx, root, "kueue", image, nil, arch, progress)
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
