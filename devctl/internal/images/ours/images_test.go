package ours

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

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
	for _, img := range All {
		if img.Name == "mlkube/trainer" && img.Package == "./samples/trainer" && img.Binary == "trainer" {
			return
		}
	}
	t.Errorf("ours.All lacks the sample trainer: %+v", All)
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

// cgoHost skips tests of cgo images where this machine cannot build one.
func cgoHost(t *testing.T) machineInfo {
	t.Helper()
	m, ok := machines[runtime.GOARCH]
	if runtime.GOOS != "linux" || !ok {
		t.Skipf("cgo images are built on linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: cgo needs a C compiler")
	}
	return machineInfo{multiarch: m.multiarch}
}

type machineInfo struct{ multiarch string }

// layerFiles reads a layer's tar: its headers in order, and each regular file's contents.
func layerFiles(t *testing.T, l interface {
	Uncompressed() (io.ReadCloser, error)
}) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var hdrs []*tar.Header
	data := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, hdr)
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			data[hdr.Name] = b
		}
	}
}

// extract writes every layer of b, in order, into a new directory, as a container runtime
// would unpack the image, and returns it.
func extract(t *testing.T, b *Built) string {
	t.Helper()
	dir := t.TempDir()
	layers, err := b.Img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		hdrs, data := layerFiles(t, l)
		for _, h := range hdrs {
			p := filepath.Join(dir, filepath.FromSlash(h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				must(t, os.MkdirAll(p, os.FileMode(h.Mode)))
			case tar.TypeReg:
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, data[h.Name], os.FileMode(h.Mode)))
			default:
				t.Errorf("layer entry %s of type %c: want only files and directories", h.Name, h.Typeflag)
			}
		}
	}
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runExtracted runs the image's binary from an extracted image through the image's own loader,
// which loads the C library from the image's library directory, not from this machine's.
func runExtracted(t *testing.T, dir string, b *Built, m machineInfo, args ...string) string {
	t.Helper()
	interp := loaderPath()
	libs := filepath.Join(dir, "lib", m.multiarch)
	bin := filepath.Join(dir, b.Binary)

	// --list tells where the loader finds each library: all in the image.
	out, err := exec.Command(filepath.Join(dir, interp), "--library-path", libs, "--list", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s --list %s: %v\n%s", interp, bin, err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, resolved, ok := strings.Cut(line, " => "); ok && !strings.HasPrefix(resolved, dir+"/") {
			t.Errorf("the loader resolves %q outside the image", strings.TrimSpace(line))
		}
	}
	if !strings.Contains(string(out), "libc.so.6 => "+filepath.Join(libs, "libc.so.6")) {
		t.Errorf("libc.so.6 does not come from the image:\n%s", out)
	}

	cmd := exec.Command(filepath.Join(dir, interp), append([]string{"--library-path", libs, bin}, args...)...)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running %s %s from the image: %v\n%s", b.Binary, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// loaderPath is the image's loader, inside the image, without the leading slash.
func loaderPath() string {
	if runtime.GOARCH == "arm64" {
		return "lib/ld-linux-aarch64.so.1"
	}
	return "lib64/ld-linux-x86-64.so.2"
}

var cgoHello = Image{Name: "mlkube/cgohello", Package: "./testdata/cgohello", Binary: "cgohello", VersionVar: "main.version", CGO: true}

// A CGO image is the binary over a base layer with the loader and the C library, copied from
// this machine, in a deterministic layer: the binary runs from the unpacked image with nothing
// of this machine's.
func TestCGOImageCarriesItsCLibrary(t *testing.T) {
	m := cgoHost(t)
	b := build(t, cgoHello)

	layers, err := b.Img.Layers()
	must(t, err)
	if len(layers) != 2 {
		t.Fatalf("%d layers, want 2 (base, binary)", len(layers))
	}
	hdrs, data := layerFiles(t, layers[0])
	var names []string
	for _, h := range hdrs {
		names = append(names, h.Name)
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("base layer entry %s: mtime %s, owner %d:%d; want the epoch and root", h.Name, h.ModTime, h.Uid, h.Gid)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("base layer entries not sorted: %q", names)
	}
	libc := "lib/" + m.multiarch + "/libc.so.6"
	loader := loaderPath()
	for _, want := range []string{loader, libc, "lib/", "lib/" + m.multiarch + "/"} {
		if !slices.Contains(names, want) {
			t.Errorf("base layer lacks %s: %q", want, names)
		}
	}
	if host, err := os.ReadFile("/" + libc); err == nil && !bytes.Equal(host, data[libc]) {
		t.Errorf("the image's %s is not this machine's", libc)
	}
	if binHdrs, _ := layerFiles(t, layers[1]); len(binHdrs) != 1 || binHdrs[0].Name != "cgohello" {
		t.Errorf("binary layer %v, want the binary alone", binHdrs)
	}

	dir := extract(t, b)
	if out := runExtracted(t, dir, b, m); out != "hello from C's abs: 42 v1.2.3-test\n" {
		t.Errorf("cgohello printed %q", out)
	}

	if again := build(t, cgoHello); again.Ref != b.Ref {
		t.Errorf("two builds of the same cgo source: %s and %s", b.Ref, again.Ref)
	}
}

// The nodeprobe image of ours.All: its binary runs from the unpacked image, and the C
// libraries the node's libnvidia-ml needs are there. (The binary is built here as `go test`
// builds it, sharing its build cache; devctl adds -trimpath.)
func TestNodeprobeImageRuns(t *testing.T) {
	m := cgoHost(t)
	i := slices.IndexFunc(All, func(img Image) bool { return img.Name == "mlkube/nodeprobe" })
	if i < 0 {
		t.Fatalf("ours.All lacks nodeprobe: %+v", All)
	}
	img := All[i]
	if !img.CGO || img.Package != "./nodeprobe/cmd/nodeprobe" || img.Binary != "nodeprobe" || img.VersionVar != "main.Version" {
		t.Errorf("nodeprobe's entry %+v", img)
	}
	// VersionVar names a variable that exists: -X on a missing one is silently ignored.
	src, err := os.ReadFile("../../../../nodeprobe/cmd/nodeprobe/main.go")
	must(t, err)
	if !strings.Contains(string(src), "\nvar Version = ") {
		t.Errorf("nodeprobe's main package has no `var Version`, which VersionVar %s names", img.VersionVar)
	}

	bin := filepath.Join(t.TempDir(), "nodeprobe")
	cmd := exec.Command("go", "build", "-ldflags", "-X "+img.VersionVar+"=v9.9.9-test", "-o", bin, img.Package)
	cmd.Dir = "../../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build nodeprobe: %v\n%s", err, out)
	}
	binary, err := os.ReadFile(bin)
	must(t, err)
	files, err := RuntimeFiles(binary, runtime.GOARCH, img.Libraries)
	must(t, err)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	want := []string{"/" + loaderPath()}
	for _, l := range append([]string{"libc.so.6"}, img.Libraries...) {
		want = append(want, "/lib/"+m.multiarch+"/"+l)
	}
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Errorf("nodeprobe's runtime files:\n%s\nwant:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	b, err := Assemble(img, binary, runtime.GOARCH, files...)
	must(t, err)

	dir := extract(t, b)
	if out := runExtracted(t, dir, b, m, "--help"); !strings.Contains(out, "nodeprobe finds the node's NVIDIA driver") {
		t.Errorf("nodeprobe --help from the image:\n%s", out)
	}
	if out := runExtracted(t, dir, b, m, "--version"); out != "nodeprobe version v9.9.9-test\n" {
		t.Errorf("nodeprobe --version from the image: %q", out)
	}
}

func TestRuntimeFilesRefuses(t *testing.T) {
	m := cgoHost(t)
	b := build(t, cgoHello)
	layers, _ := b.Img.Layers()
	_, data := layerFiles(t, layers[1])
	binary := data["cgohello"]

	if _, err := RuntimeFiles(binary, runtime.GOARCH, []string{"libnot-there.so.7"}); err == nil ||
		!strings.Contains(err.Error(), "shared library libnot-there.so.7 not found in /lib/"+m.multiarch) {
		t.Errorf("a library that is nowhere: %v", err)
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	if _, err := RuntimeFiles(binary, other, nil); err == nil || !strings.Contains(err.Error(), "not "+other) {
		t.Errorf("a binary of another architecture: %v", err)
	}
	if _, err := RuntimeFiles([]byte("#!/bin/sh\n"), runtime.GOARCH, nil); err == nil || !strings.Contains(err.Error(), "not an ELF") && !strings.Contains(err.Error(), "ELF") {
		t.Errorf("a shell script: %v", err)
	}
	static := build(t, hello)
	layers, _ = static.Img.Layers()
	_, data = layerFiles(t, layers[0])
	if _, err := RuntimeFiles(data["hello"], runtime.GOARCH, nil); err == nil || !strings.Contains(err.Error(), "statically linked") {
		t.Errorf("a static binary: %v", err)
	}
	if _, err := RuntimeFiles(binary, "riscv64", nil); err == nil {
		t.Error("an architecture without cgo images: no error")
	}
}

// The base layer is the same whatever order the files come in.
func TestBaseLayerIsDeterministic(t *testing.T) {
	files := []File{
		{Path: "/lib64/ld.so", Mode: 0o755, Data: []byte("loader")},
		{Path: "/lib/x86_64-linux-gnu/libc.so.6", Mode: 0o644, Data: []byte("libc")},
		{Path: "/lib/x86_64-linux-gnu/libm.so.6", Mode: 0o644, Data: []byte("libm")},
	}
	first, err := Assemble(hello, []byte("binary"), "amd64", files...)
	must(t, err)
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	second, err := Assemble(hello, []byte("binary"), "amd64", reversed...)
	must(t, err)
	if first.Ref != second.Ref {
		t.Errorf("the same files in another order: %s and %s", first.Ref, second.Ref)
	}
	layers, _ := first.Img.Layers()
	hdrs, _ := layerFiles(t, layers[0])
	var names []string
	for _, h := range hdrs {
		names = append(names, fmt.Sprintf("%s %o", h.Name, h.Mode))
	}
	want := []string{"lib/ 755", "lib/x86_64-linux-gnu/ 755", "lib/x86_64-linux-gnu/libc.so.6 644", "lib/x86_64-linux-gnu/libm.so.6 644", "lib64/ 755", "lib64/ld.so 755"}
	if !slices.Equal(names, want) {
		t.Errorf("base layer:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range [][]File{
		{{Path: "lib/relative.so", Data: []byte("x")}},
		{{Path: "/lib/a", Data: []byte("x")}, {Path: "/lib/a", Data: []byte("y")}},
		{{Path: "/lib", Data: []byte("x")}, {Path: "/lib/a", Data: []byte("y")}},
	} {
		if _, err := Assemble(hello, []byte("binary"), "amd64", bad...); err == nil {
			t.Errorf("base files %v: no error", bad)
		}
	}
}

// What go build -v prints as it goes reaches Progress as what the build does now; the error keeps
// the compiler's messages and go's own lines, not the package names.
func TestRunBuildReportsProgressAndKeepsTheMessages(t *testing.T) {
	script := `echo 'go: downloading example.com/mod v1.2.3' >&2
echo 'k8s.io/client-go/kubernetes' >&2
echo 'example.com/app/cmd/app' >&2
echo '# example.com/app/cmd/app' >&2
echo 'cmd/app/main.go:6:2: undefined: x' >&2
exit 1`
	var heard []string
	messages, err := runBuild(exec.Command("sh", "-c", script), func(doing string) { heard = append(heard, doing) })
	if err == nil {
		t.Error("a failing build gave no error")
	}
	want := []string{"downloading example.com/mod v1.2.3", "compiling k8s.io/client-go/kubernetes", "compiling example.com/app/cmd/app"}
	if !slices.Equal(heard, want) {
		t.Errorf("progress heard %q, want %q", heard, want)
	}
	if got, want := string(messages), "go: downloading example.com/mod v1.2.3\n# example.com/app/cmd/app\ncmd/app/main.go:6:2: undefined: x\n"; got != want {
		t.Errorf("messages %q, want %q", got, want)
	}
}

// An image whose program is run by name has it in a folder of the default PATH, each parent
// folder an entry of its own, and its entrypoint there.
func TestBinaryInAFolder(t *testing.T) {
	img := Image{Name: "mlkube/tensorboard-standin", Binary: "tensorboard", Dir: "usr/local/bin"}
	b, err := Assemble(img, []byte("program"), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := b.Img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	hdrs, data := layerFiles(t, layers[0])
	var got []string
	for _, h := range hdrs {
		got = append(got, fmt.Sprintf("%s %c %o", h.Name, h.Typeflag, h.Mode))
	}
	want := []string{"usr/ 5 755", "usr/local/ 5 755", "usr/local/bin/ 5 755", "usr/local/bin/tensorboard 0 755"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("layer entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if string(data["usr/local/bin/tensorboard"]) != "program" {
		t.Errorf("the binary's contents: %q", data["usr/local/bin/tensorboard"])
	}
	cf, err := b.Img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/local/bin/tensorboard" {
		t.Errorf("entrypoint %q", got)
	}
}
