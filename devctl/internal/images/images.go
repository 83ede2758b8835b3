// Package images builds our programs from source into container images without Docker: go build
// gives one static binary, go-containerregistry wraps it in a one-layer image, and the image is
// tagged by its own digest, so the same source always gives the same tag and a changed one a new
// tag (the node never runs a stale image under an old name). Each is also tagged DevTag, an alias
// that always names the newest build, for manifests written by hand.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// An Image is one of our programs as an image: the binary alone, at /Binary, run as Entrypoint.
type Image struct {
	// Name is the image name without tag, e.g. "mlkube/operator".
	Name string
	// Package is the Go main package, relative to the module root.
	Package string
	// Binary is the file name at the image root.
	Binary string
	// VersionVar is the string variable that -X sets to the version; empty for none.
	VersionVar string
}

// Ours lists the images devctl builds, in build order. nodeprobe joins with one line.
var Ours = []Image{
	{Name: "mlkube/operator", Package: "./operator/cmd/mlkube-operator", Binary: "mlkube-operator", VersionVar: "github.com/mlkube/mlkube/operator.Version"},
	{Name: "mlkube/trainer", Package: "./samples/trainer", Binary: "trainer"},
}

// DevTag is the alias every image of ours also gets in the nodes: `image: mlkube/trainer:dev`
// with imagePullPolicy IfNotPresent always runs the newest build, while devctl's own manifests
// name the content tag, which never moves.
const DevTag = "dev"

// User is who our images run as: the conventional "nonroot" of distroless images, matching the
// runAsUser of the manifests.
const User = "65532:65532"

// Built is an image ready to load into a cluster.
type Built struct {
	Image
	// Ref is Name tagged with the first 12 hex digits of the image digest.
	Ref name.Tag
	Img v1.Image
}

// Dev is the image's DevTag alias, e.g. mlkube/trainer:dev.
func (b *Built) Dev() name.Tag {
	// Name is a valid repository (Assemble made Ref from it), so this cannot fail.
	tag, _ := name.NewTag(b.Name + ":" + DevTag)
	return tag
}

// Options say where and for what to build.
type Options struct {
	// Dir is the module root the packages are relative to.
	Dir string
	// Version is set into VersionVar.
	Version string
	// Arch is the GOARCH of the nodes.
	Arch string
}

// Build compiles img's package into a static linux binary and assembles the image around it.
// When the compiler fails, the error holds its output.
func Build(ctx context.Context, opts Options, img Image) (*Built, error) {
	tmp, err := os.MkdirTemp("", "devctl-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, img.Binary)

	ldflags := "-s -w"
	if img.VersionVar != "" {
		ldflags += " -X " + img.VersionVar + "=" + opts.Version
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, img.Package)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+opts.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s failed (%v):\n%s", img.Package, err, indent(out))
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return Assemble(img, binary, opts.Arch)
}

// Assemble makes the image of img from its binary: one layer holding /Binary (mode 0755), run as
// User. Every timestamp is zero so that equal binaries give equal digests.
func Assemble(img Image, binary []byte, arch string) (*Built, error) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     img.Binary,
		Mode:     0o755,
		Size:     int64(len(binary)),
		ModTime:  time.Unix(0, 0),
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return nil, fmt.Errorf("making the layer of %s: %w", img.Name, err)
	}

	image, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Config.Entrypoint = []string{"/" + img.Binary}
	cf.Config.User = User
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return nil, err
	}

	digest, err := image.Digest()
	if err != nil {
		return nil, err
	}
	ref, err := name.NewTag(img.Name + ":" + digest.Hex[:12])
	if err != nil {
		return nil, err
	}
	return &Built{Image: img, Ref: ref, Img: image}, nil
}

// WriteArchive writes the images as one docker-archive tarball, the format `docker load` and
// `ctr images import` read, each under its content tag and its DevTag alias. Importing it moves
// an alias that named an older build.
func WriteArchive(w io.Writer, built ...*Built) error {
	refs := make(map[name.Reference]v1.Image, 2*len(built))
	for _, b := range built {
		refs[b.Ref] = b.Img
		refs[b.Dev()] = b.Img
	}
	return tarball.MultiRefWrite(refs, w)
}

// ParseList reads the table `ctr images list` prints (REF TYPE DIGEST ...) into the manifest
// digest each reference names: two references with the same digest are the same image.
func ParseList(lines []string) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] == "REF" || !strings.HasPrefix(f[2], "sha256:") {
			continue
		}
		out[f[0]] = f[2]
	}
	return out
}

// Lookup finds ref in a ParseList result, whatever default registry the node spells it with,
// and returns the digest it names.
func Lookup(list map[string]string, ref string) (string, bool) {
	for r, digest := range list {
		if SameRef(r, ref) {
			return digest, true
		}
	}
	return "", false
}

// SameRef reports whether two image references name the same image once defaults are filled in
// (a node lists "mlkube/operator:abc" with its default registry prefixed).
func SameRef(a, b string) bool {
	ra, err := name.ParseReference(a)
	if err != nil {
		return false
	}
	rb, err := name.ParseReference(b)
	if err != nil {
		return false
	}
	return ra.Name() == rb.Name()
}

func indent(out []byte) string {
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return "  (no output)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
