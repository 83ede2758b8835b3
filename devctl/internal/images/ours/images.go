// Package ours builds our programs from source into container images without Docker: go build
// gives one static binary, go-containerregistry wraps it in a one-layer image, and the image is
// tagged by its own digest, so the same source always gives the same tag and a changed one a new
// tag (the node never runs a stale image under an old name). Each is also tagged DevTag, an alias
// that always names the newest build, for manifests written by hand.
//
// A program that needs cgo (nodeprobe: go-nvml dlopens the driver's libnvidia-ml) is linked
// against the build host's glibc; its image gets a base layer under the binary's, holding the
// loader and the C libraries it needs, copied from the build host (RuntimeFiles).
package ours

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// An Image is one of our programs as an image: the binary at /Binary, run as Entrypoint; alone,
// unless it needs cgo.
type Image struct {
	// Name is the image name without tag, e.g. "mlkube/operator".
	Name string
	// Package is the Go main package, relative to the module root.
	Package string
	// Binary is the program's file name.
	Binary string
	// Dir is the folder of the image that holds Binary; empty for the root. A program that a
	// manifest runs by name (command: [tensorboard]) must be in a folder of the default PATH.
	Dir string
	// VersionVar is the string variable that -X sets to the version; empty for none.
	VersionVar string
	// CGO builds with cgo, for the build host's architecture only: the binary is linked
	// dynamically against glibc, and the image gets a base layer with the loader and the C
	// libraries it needs, from the build host.
	CGO bool
	// Libraries are the sonames of shared libraries a CGO image needs beyond the binary's own
	// (DT_NEEDED): those the libraries it dlopens need from the C library.
	Libraries []string
}

// All lists the images devctl builds, in build order.
var All = []Image{
	{Name: "mlkube/operator", Package: "./operator/cmd/mlkube-operator", Binary: "mlkube-operator", VersionVar: "github.com/mlkube/mlkube/operator.Version"},
	{Name: "mlkube/trainer", Package: "./samples/trainer", Binary: "trainer"},
	// nodeprobe dlopens the node's libnvidia-ml, which brings its own DT_NEEDED from glibc: the
	// pre-2.34 split of libc (libdl, libpthread, librt are stubs since glibc 2.34) and libm.
	{Name: "mlkube/nodeprobe", Package: "./nodeprobe/cmd/nodeprobe", Binary: "nodeprobe", VersionVar: "main.Version", CGO: true,
		Libraries: []string{"libdl.so.2", "libm.so.6", "libpthread.so.0", "librt.so.1"}},
	// Offline, TensorBoard's own image cannot be had: this stands in for it (spec.tensorboard.image)
	// where a job's TensorBoard must answer. The operator runs `tensorboard --logdir ...`.
	{Name: "mlkube/tensorboard-standin", Package: "./samples/tensorboard-standin", Binary: "tensorboard", Dir: "usr/local/bin"},
}

// DevTag is the alias every image of ours also gets in the nodes: `image: mlkube/trainer:dev`
// with imagePullPolicy IfNotPresent always runs the newest build, while devctl's own manifests
// name the content tag, which never moves.
const DevTag = "dev"

// User is who our images run as: the conventional "nonroot" of distroless images, matching the
// runAsUser of the manifests.
const User = "65532:65532"

// Path is where the binary lies in the image, without the leading slash.
func (img Image) Path() string { return path.Join(img.Dir, img.Binary) }

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
	// Progress, when set, hears what the build does while it runs: "compiling <package>",
	// "downloading <module> <version>", "linking", "assembling the image".
	Progress func(doing string)
}

// goBuild is how Build runs go build for an image: the environment and flags, which Key hashes.
type goBuild struct {
	env     []string
	ldflags string
}

func newBuild(opts Options, img Image) (*goBuild, error) {
	cgo := "CGO_ENABLED=0"
	if img.CGO {
		// cgo needs a C compiler and a C library for the target; the host's are for the host.
		if runtime.GOOS != "linux" || runtime.GOARCH != opts.Arch {
			return nil, fmt.Errorf("%s needs cgo, linked against glibc: build it on a linux/%s machine, like the nodes (this one is %s/%s)", img.Name, opts.Arch, runtime.GOOS, runtime.GOARCH)
		}
		cgo = "CGO_ENABLED=1"
	}
	// No build ID: it hashes the inputs, comments included, so without it a change that leaves
	// the program as it was (a comment, a test) gives the same binary, the same image and tag,
	// and nothing to load or roll out.
	ldflags := "-s -w -buildid="
	if img.VersionVar != "" {
		ldflags += " -X " + img.VersionVar + "=" + opts.Version
	}
	return &goBuild{env: []string{cgo, "GOOS=linux", "GOARCH=" + opts.Arch}, ldflags: ldflags}, nil
}

// args are go build's arguments, writing the binary to out. -buildvcs=false: the binary does not
// depend on the state of the git checkout, only on its sources (and VersionVar).
func (b *goBuild) args(out string) []string {
	return []string{"build", "-v", "-trimpath", "-buildvcs=false", "-ldflags", b.ldflags, "-o", out}
}

// Build compiles img's package into a linux binary, static unless img needs cgo, and assembles
// the image around it. When the compiler fails, the error holds its output.
func Build(ctx context.Context, opts Options, img Image) (*Built, error) {
	b, err := newBuild(opts, img)
	if err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	tmp, err := os.MkdirTemp("", "devctl-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, img.Binary)

	cmd := exec.CommandContext(ctx, "go", append(b.args(bin), img.Package)...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), b.env...)
	if messages, err := runBuild(cmd, progress); err != nil {
		return nil, fmt.Errorf("go build %s failed (%v):\n%s", img.Package, err, indent(messages))
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	progress("assembling the image")
	var base []File
	if img.CGO {
		if base, err = RuntimeFiles(binary, opts.Arch, img.Libraries); err != nil {
			return nil, fmt.Errorf("%s: %w", img.Name, err)
		}
	}
	return Assemble(img, binary, opts.Arch, base...)
}

// runBuild runs `go build -v` and reads what it prints as it goes: the name of each package as it
// starts compiling it (the main package last: then it links), "go: downloading" lines, and the
// compiler's messages, which it returns, without the package names.
func runBuild(cmd *exec.Cmd, progress func(string)) ([]byte, error) {
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	var messages bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		s := bufio.NewScanner(r)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			line := s.Text()
			switch rest, downloading := strings.CutPrefix(line, "go: downloading "); {
			case downloading:
				progress("downloading " + rest)
			case isPackageLine(line):
				progress("compiling " + line)
				continue
			}
			messages.WriteString(line + "\n")
		}
		io.Copy(io.Discard, r) // a line too long for the scanner: let go build finish
	}()
	err := cmd.Run()
	w.Close()
	<-read
	return messages.Bytes(), err
}

// isPackageLine says whether a line of go build -v's output is a package's import path: one
// word, no colon (a compiler message has "file:line:", go's own lines have spaces).
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t:#")
}

// Assemble makes the image of img from its binary: a layer holding /Binary (mode 0755), run as
// User, over a base layer holding base when there is any (a CGO image's RuntimeFiles). Every
// timestamp is zero and the entries are sorted, so that equal inputs give equal digests.
func Assemble(img Image, binary []byte, arch string, base ...File) (*Built, error) {
	var layers []v1.Layer
	if len(base) > 0 {
		layer, err := baseLayer(base)
		if err != nil {
			return nil, fmt.Errorf("making the base layer of %s: %w", img.Name, err)
		}
		layers = append(layers, layer)
	}
	var entries []entry
	if img.Dir != "" {
		// Each parent folder as its own entry, so that every unpacker gives it the same mode.
		var dir string
		for _, part := range strings.Split(img.Dir, "/") {
			dir = path.Join(dir, part)
			entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}})
		}
	}
	entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: img.Path(), Mode: 0o755}, data: binary})
	layer, err := tarLayer(entries)
	if err != nil {
		return nil, fmt.Errorf("making the layer of %s: %w", img.Name, err)
	}
	layers = append(layers, layer)

	image, err := mutate.AppendLayers(empty.Image, layers...)
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
	cf.Config.Entrypoint = []string{"/" + img.Path()}
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

// entry is one entry of a layer's tar.
type entry struct {
	hdr  tar.Header
	data []byte
}

// tarLayer makes a layer of the entries, in their order, owned by root, dated the epoch.
func tarLayer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := e.hdr
		hdr.Size = int64(len(e.data))
		hdr.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// Compressed once, fast: the digest (the tag) needs the compressed layer, and so does the
	// archive loaded into the nodes, which would otherwise compress it again.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
}

// baseLayer makes the layer of files: each with its parent directories (mode 0755) before it,
// everything sorted by path.
func baseLayer(files []File) (v1.Layer, error) {
	byPath := map[string]entry{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean(f.Path), "/")
		if !path.IsAbs(f.Path) || p == "" {
			return nil, fmt.Errorf("base layer file %q: not an absolute file path", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("base layer file %s: given twice", f.Path)
		}
		byPath[p] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: f.Mode}, data: f.Data}
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			byPath[dir+"/"] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}}
		}
	}
	for p, e := range byPath {
		if _, clash := byPath[strings.TrimSuffix(p, "/")]; e.hdr.Typeflag == tar.TypeDir && clash {
			return nil, fmt.Errorf("base layer file /%s: also a directory of other files", strings.TrimSuffix(p, "/"))
		}
	}
	paths := slices.Sorted(maps.Keys(byPath))
	entries := make([]entry, len(paths))
	for i, p := range paths {
		entries[i] = byPath[p]
	}
	return tarLayer(entries)
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
