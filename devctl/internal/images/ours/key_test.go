package ours

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// module writes a small Go module into a new directory: a main package that imports a library
// of the module, which embeds a file, beside a package nothing imports.
func module(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":               "module example.com/app\n\ngo 1.22\n",
		"cmd/app/main.go":      "package main\n\nimport \"example.com/app/lib\"\n\nvar version = \"unset\"\n\nfunc main() { println(lib.Greeting(), version) }\n",
		"cmd/app/main_test.go": "package main\n\nimport \"testing\"\n\nfunc TestNothing(t *testing.T) {}\n",
		"lib/lib.go":           "package lib\n\nimport _ \"embed\"\n\n//go:embed greeting.txt\nvar greeting string\n\nfunc Greeting() string { return greeting }\n",
		"lib/greeting.txt":     "hello\n",
		"lib/lib_windows.go":   "//go:build windows\n\npackage lib\n\nconst onWindows = true\n",
		"lib/notes.md":         "not part of any build\n",
		"unused/unused.go":     "package unused\n\nconst X = 1\n",
	}
	for name, content := range files {
		write(t, filepath.Join(dir, name), content)
	}
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(content), 0o644))
}

var app = Image{Name: "example/app", Package: "./cmd/app", Binary: "app", VersionVar: "main.version"}

func key(t *testing.T, dir string, img Image, version string) string {
	t.Helper()
	k, err := Key(context.Background(), Options{Dir: dir, Version: version, Arch: runtime.GOARCH}, img)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Edits to what goes into the program change the key; undoing them brings it back. Files that
// do not go into this build change nothing: tests, docs, a package nothing imports, a file for
// another OS. Nor does a file's time.
func TestKeyFollowsTheSourcesThatGoIntoTheBuild(t *testing.T) {
	dir := module(t)
	base := key(t, dir, app, "v1")
	if again := key(t, dir, app, "v1"); again != base {
		t.Fatalf("two keys of unchanged sources: %s and %s", base, again)
	}

	for _, tc := range []struct {
		what, file, content string
		changes             bool
	}{
		{"the main package's file", "cmd/app/main.go", "package main\n\nimport \"example.com/app/lib\"\n\nvar version = \"unset\"\n\nfunc main() { println(lib.Greeting(), version, 2) }\n", true},
		{"a dependency's file", "lib/lib.go", "package lib\n\nimport _ \"embed\"\n\n//go:embed greeting.txt\nvar greeting string\n\nfunc Greeting() string { return greeting + \"!\" }\n", true},
		{"a file the dependency embeds", "lib/greeting.txt", "bonjour\n", true},
		{"a new file in a dependency", "lib/extra.go", "package lib\n\nconst Extra = 1\n", true},
		{"go.mod", "go.mod", "module example.com/app\n\ngo 1.23\n", true},
		{"a test file", "cmd/app/main_test.go", "package main\n", false},
		{"a file for another OS", "lib/lib_windows.go", "//go:build windows\n\npackage lib\n\nconst onWindows = false\n", false},
		{"a file no build reads", "lib/notes.md", "changed\n", false},
		{"a package nothing imports", "unused/unused.go", "package unused\n\nconst X = 2\n", false},
	} {
		path := filepath.Join(dir, tc.file)
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		write(t, path, tc.content)
		changed := key(t, dir, app, "v1")
		if (changed != base) != tc.changes {
			t.Errorf("changing %s (%s): key changed %v, want %v", tc.what, tc.file, changed != base, tc.changes)
		}
		if old == nil {
			must(t, os.Remove(path))
		} else {
			write(t, path, string(old))
		}
		if back := key(t, dir, app, "v1"); back != base {
			t.Errorf("undoing the change to %s: key %s, want %s as before", tc.file, back, base)
		}
	}

	future := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(dir, "lib/lib.go"), future, future))
	if touched := key(t, dir, app, "v1"); touched != base {
		t.Error("touching a file changed the key")
	}
}

// The version goes into the key of a program that embeds it, and only there.
func TestKeyHoldsTheVersionOnlyWhereItIsEmbedded(t *testing.T) {
	dir := module(t)
	if key(t, dir, app, "v1") == key(t, dir, app, "v2-dirty") {
		t.Error("the version a program embeds is not in its key")
	}
	noVersion := app
	noVersion.VersionVar = ""
	if key(t, dir, noVersion, "v1") != key(t, dir, noVersion, "v2-dirty") {
		t.Error("the version changed the key of a program that does not embed it")
	}
	if key(t, dir, noVersion, "v1") == key(t, dir, app, "v1") {
		t.Error("the build flags are not in the key")
	}
	renamed := app
	renamed.Name = "example/other"
	if key(t, dir, renamed, "v1") == key(t, dir, app, "v1") {
		t.Error("the image name is not in the key")
	}
}

// A module replaced by a local directory is read like ours: its files count, not its version.
func TestKeyFollowsALocallyReplacedModule(t *testing.T) {
	dir := module(t)
	dep := t.TempDir()
	write(t, filepath.Join(dep, "go.mod"), "module example.com/dep\n\ngo 1.22\n")
	write(t, filepath.Join(dep, "dep.go"), "package dep\n\nconst Name = \"dep\"\n")
	write(t, filepath.Join(dir, "go.mod"), "module example.com/app\n\ngo 1.22\n\nrequire example.com/dep v0.0.0\n\nreplace example.com/dep => "+dep+"\n")
	write(t, filepath.Join(dir, "lib/dep.go"), "package lib\n\nimport \"example.com/dep\"\n\nvar Dep = dep.Name\n")
	base := key(t, dir, app, "v1")
	write(t, filepath.Join(dep, "dep.go"), "package dep\n\nconst Name = \"dependency\"\n")
	if key(t, dir, app, "v1") == base {
		t.Error("changing a file of a locally replaced module left the key as it was")
	}
}

// devctl's own key (hack/up.sh rebuilds it on another one) follows its sources, and is not an
// image's.
func TestProgramKeyFollowsTheSources(t *testing.T) {
	dir := module(t)
	ctx := context.Background()
	base, err := ProgramKey(ctx, dir, app.Package)
	must(t, err)
	if again, err := ProgramKey(ctx, dir, app.Package); err != nil || again != base {
		t.Fatalf("two keys of unchanged sources: %s and %s (%v)", base, again, err)
	}
	if base == key(t, dir, app, "v1") {
		t.Error("a program built for this machine has its image's key")
	}
	write(t, filepath.Join(dir, "lib/greeting.txt"), "bonjour\n")
	if changed, err := ProgramKey(ctx, dir, app.Package); err != nil || changed == base {
		t.Errorf("a changed file it embeds left the key as it was (%v)", err)
	}
}

func TestKeyOfAPackageThatDoesNotExistFails(t *testing.T) {
	dir := module(t)
	missing := app
	missing.Package = "./cmd/missing"
	if _, err := Key(context.Background(), Options{Dir: dir, Version: "v1", Arch: runtime.GOARCH}, missing); err == nil {
		t.Error("no error")
	}
}

// Our own images: each has a key of its own, the same twice.
func TestKeysOfOurImages(t *testing.T) {
	opts := Options{Dir: "../../../..", Version: "v0-test", Arch: runtime.GOARCH}
	seen := map[string]string{}
	for _, img := range All {
		if img.CGO {
			cgoHost(t)
		}
		first, err := Key(context.Background(), opts, img)
		must(t, err)
		second, err := Key(context.Background(), opts, img)
		must(t, err)
		if first != second {
			t.Errorf("%s: two keys of the same checkout: %s and %s", img.Name, first, second)
		}
		if other, dup := seen[first]; dup {
			t.Errorf("%s and %s have the same key", img.Name, other)
		}
		seen[first] = img.Name
	}
}

func TestCacheRemembersTheImageOfAKey(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "images")}
	if _, ok := c.Lookup(app, "k1"); ok {
		t.Fatal("an empty cache found an image")
	}
	ref := name.MustParseReference("example/app:0123456789ab").(name.Tag)
	must(t, c.Store("k1", ref))
	got, ok := c.Lookup(app, "k1")
	if !ok || got.String() != ref.String() {
		t.Errorf("Lookup = %s, %v; want %s", got, ok, ref)
	}
	if _, ok := c.Lookup(app, "k2"); ok {
		t.Error("found an image for another key")
	}
	other := app
	other.Name = "example/other"
	if _, ok := c.Lookup(other, "k1"); ok {
		t.Error("found another image's reference")
	}
	write(t, filepath.Join(c.Dir, "k3"), "not a reference!\n")
	if _, ok := c.Lookup(app, "k3"); ok {
		t.Error("a damaged entry was found")
	}

	for i := range 2*cacheKeep + 1 {
		must(t, c.Store(fmt.Sprintf("many%03d", i), ref))
	}
	entries, err := os.ReadDir(c.Dir)
	must(t, err)
	if len(entries) > 2*cacheKeep {
		t.Errorf("the cache keeps %d entries, want at most %d", len(entries), 2*cacheKeep)
	}
}

// A kept image comes back whole, under its reference; a missing or damaged file, or one that
// holds another image, is no image; only the newest imagesKeep are kept.
func TestCacheKeepsTheImagesThemselves(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "images")}
	b, err := Assemble(app, []byte("a binary"), runtime.GOARCH)
	must(t, err)
	must(t, c.Store("k1", b.Ref))
	if _, ok := c.LoadImage(app, "k1"); ok {
		t.Fatal("found an image that was never kept")
	}
	must(t, c.StoreImage("k1", b))
	got, ok := c.LoadImage(app, "k1")
	if !ok {
		t.Fatal("the kept image was not found")
	}
	want, err := b.Img.Digest()
	must(t, err)
	if d, err := got.Img.Digest(); err != nil || d != want || got.Ref != b.Ref {
		t.Errorf("kept image %s (%v) as %s; want %s as %s", d, err, got.Ref, want, b.Ref)
	}

	// The reference of k2 names another image than the file holds.
	other, err := Assemble(app, []byte("another binary"), runtime.GOARCH)
	must(t, err)
	must(t, c.Store("k2", other.Ref))
	must(t, c.StoreImage("k2", b))
	if _, ok := c.LoadImage(app, "k2"); ok {
		t.Error("a file holding another image than its reference was taken")
	}
	write(t, filepath.Join(c.Dir, "k1"+imageSuffix), "not an image")
	if _, ok := c.LoadImage(app, "k1"); ok {
		t.Error("a damaged file was taken")
	}

	for i := range imagesKeep + 3 {
		must(t, c.StoreImage(fmt.Sprintf("many%02d", i), b))
	}
	kept, err := filepath.Glob(filepath.Join(c.Dir, "*"+imageSuffix))
	must(t, err)
	if len(kept) != imagesKeep {
		t.Errorf("the cache keeps %d images, want %d", len(kept), imagesKeep)
	}
}

// An image taken from the cache is read from its file later, when it is written out: storing
// other images meanwhile (a build of another of ours, in the same devctl up) must not prune the
// file from under it, even where it was the oldest.
func TestAnImageTakenFromTheCacheOutlivesThePruning(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "images")}
	b, err := Assemble(app, []byte("a binary"), runtime.GOARCH)
	must(t, err)
	must(t, c.Store("taken", b.Ref))
	must(t, c.StoreImage("taken", b))
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(filepath.Join(c.Dir, "taken"+imageSuffix), old, old))
	for i := range imagesKeep - 1 {
		must(t, c.StoreImage(fmt.Sprintf("before%02d", i), b))
	}
	got, ok := c.LoadImage(app, "taken")
	if !ok {
		t.Fatal("the kept image was not found")
	}
	must(t, c.StoreImage("after", b))
	if err := WriteArchive(io.Discard, got); err != nil {
		t.Errorf("writing out the image taken from the cache, after another was stored: %v", err)
	}
}
