package images

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var hello = Image{Name: "mlkube/hello", Package: "./testdata/hello", Binary: "hello", VersionVar: "main.version"}

func build(t *testing.T, img Image) *Built {
	t.Helper()
	b, err := Build(context.Background(), Options{Dir: ".", Version: "v1.2.3-test", Arch: runtime.GOARCH}, img)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildAssemblesARunnableOneLayerImage(t *testing.T) {
	b := build(t, hello)

	layers, err := b.Img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "hello" || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 {
		t.Errorf("layer entry %q type %c mode %o, want regular file hello (at the image root) mode 755", hdr.Name, hdr.Typeflag, hdr.Mode)
	}
	binary, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("the layer holds more than the binary (next: %v)", err)
	}

	cf, err := b.Img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/hello" {
		t.Errorf("entrypoint %q, want [/hello]", got)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}

	if !strings.HasPrefix(b.Ref.String(), "mlkube/hello:") || len(b.Ref.TagStr()) != 12 {
		t.Errorf("ref %s, want mlkube/hello:<12 hex digits>", b.Ref)
	}
	digest, _ := b.Img.Digest()
	if !strings.HasPrefix(digest.Hex, b.Ref.TagStr()) {
		t.Errorf("tag %s is not the start of the image digest %s", b.Ref.TagStr(), digest)
	}

	// The binary is static, built for linux with the version set: it runs here when here is linux.
	if runtime.GOOS == "linux" {
		path := filepath.Join(t.TempDir(), "hello")
		if err := os.WriteFile(path, binary, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path).CombinedOutput()
		if err != nil || string(out) != "hello v1.2.3-test\n" {
			t.Errorf("running the binary: %q, %v; want \"hello v1.2.3-test\"", out, err)
		}
	}
}

func TestTheSameSourceGivesTheSameTag(t *testing.T) {
	first, second := build(t, hello), build(t, hello)
	if first.Ref != second.Ref {
		t.Errorf("two builds of the same source: %s and %s", first.Ref, second.Ref)
	}
	other, err := Assemble(hello, []byte("another binary"), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if other.Ref == first.Ref {
		t.Errorf("a different binary kept the tag %s", first.Ref)
	}
}

func TestArchiveReadsBack(t *testing.T) {
	b := build(t, hello)
	path := filepath.Join(t.TempDir(), "images.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(f, b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	tag := b.Ref
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	got, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := b.Img.Digest()
	if got != want {
		t.Errorf("digest read back %s, written %s", got, want)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].RepoTags) != 2 || !slices.Contains(m[0].RepoTags, b.Ref.String()) || !slices.Contains(m[0].RepoTags, "mlkube/hello:dev") {
		t.Errorf("archive manifest %+v, want one image tagged %s and mlkube/hello:dev", m, b.Ref)
	}
	dev := b.Dev()
	img, err = tarball.ImageFromPath(path, &dev)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := img.Digest(); got != want {
		t.Errorf("the :dev alias reads back as %s, want %s", got, want)
	}
}

func TestTheTrainerIsOneOfOurs(t *testing.T) {
	for _, img := range Ours {
		if img.Name == "mlkube/trainer" && img.Package == "./samples/trainer" && img.Binary == "trainer" {
			return
		}
	}
	t.Errorf("images.Ours lacks the sample trainer: %+v", Ours)
}

func TestParseListAndLookup(t *testing.T) {
	// What `ctr --namespace=k8s.io images list` prints on a node.
	// The node spells our images with the default registry in front.
	repo := name.MustParseReference("mlkube/trainer").Context().Name()
	list := ParseList(strings.Split(`REF                                               TYPE                                                 DIGEST                                                                  SIZE      PLATFORMS   LABELS
`+repo+`:0123456789ab             application/vnd.docker.distribution.manifest.v2+json sha256:aaaa000000000000000000000000000000000000000000000000000000000000 3.1 MiB   linux/amd64 io.cri-containerd.image=managed
`+repo+`:dev                      application/vnd.docker.distribution.manifest.v2+json sha256:bbbb000000000000000000000000000000000000000000000000000000000000 3.0 MiB   linux/amd64 io.cri-containerd.image=managed
sha256:cccc000000000000000000000000000000000000000000000000000000000000 application/vnd.docker.distribution.manifest.v2+json sha256:aaaa000000000000000000000000000000000000000000000000000000000000 3.1 MiB linux/amd64 io.cri-containerd.image=managed`, "\n"))
	if len(list) != 3 {
		t.Fatalf("parsed %d references, want 3: %v", len(list), list)
	}
	if d, ok := Lookup(list, "mlkube/trainer:0123456789ab"); !ok || !strings.HasPrefix(d, "sha256:aaaa") {
		t.Errorf("content tag: %q %v", d, ok)
	}
	if d, ok := Lookup(list, "mlkube/trainer:dev"); !ok || !strings.HasPrefix(d, "sha256:bbbb") {
		t.Errorf(":dev alias: %q %v", d, ok)
	}
	if _, ok := Lookup(list, "mlkube/operator:dev"); ok {
		t.Error("found an image the node does not have")
	}
}

func TestBuildFailureShowsTheCompilerOutput(t *testing.T) {
	_, err := Build(context.Background(), Options{Dir: ".", Version: "v0", Arch: runtime.GOARCH},
		Image{Name: "mlkube/broken", Package: "./testdata/broken", Binary: "broken"})
	if err == nil {
		t.Fatal("a package that does not compile built")
	}
	for _, want := range []string{"go build ./testdata/broken failed", "main.go:6", "cannot use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestSameRef(t *testing.T) {
	ref := name.MustParseReference("mlkube/operator:0123456789ab").Context().Name()
	for _, tc := range []struct {
		listed string
		want   bool
	}{
		{"mlkube/operator:0123456789ab", true},
		// What the node's containerd lists: the short name with its default registry.
		{ref + ":0123456789ab", true},
		{"mlkube/operator:ba9876543210", false},
		{"sha256:0d1d3a4f0a1f3e8b7f6a0c8e0c5a7e2b1f6b0d9c8e7f6a5b4c3d2e1f0a9b8c7d", false},
	} {
		if got := SameRef("mlkube/operator:0123456789ab", tc.listed); got != tc.want {
			t.Errorf("SameRef(mlkube/operator:0123456789ab, %s) = %v, want %v", tc.listed, got, tc.want)
		}
	}
}
