package scripted

import (
	"context"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/kueue"
)

// kueueImage is Kueue's manager as an image: the binary where the chart's Deployment runs it, as
// ours.User (the chart's pod runs as non-root).
var kueueImage = ours.Image{Name: kueue.ImageName, Binary: kueue.ManagerBinary}

// Kueue builds Kueue's manager with hack/build-kubernetes.sh kueue (cached outside the clone by
// version; minutes, cold) and tags its image by its content; progress hears the build.
func Kueue(ctx context.Context, root, arch string, progress func(string)) (*Scripted, error) {
	return Build(ctx, root, "kueue", kueueImage, nil, arch, progress)
}
