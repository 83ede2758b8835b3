// Package scripted turns a binary that a script builds from Go modules of its own into an image
// tagged by its content: Kueue's manager (kueue.go) and the registry (registry.go). Our own
// programs, built from this module, are package ours'.
package scripted

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/scripts"
)

// Scripted is a binary that a script builds from Go modules of its own (Kueue's manager, the
// registry: hack/build-kubernetes.sh, cached outside the clone by version) and the image it goes
// into, tagged by what goes into the image: IMAGE:VERSION-HASH. A Docker engine or a node that
// holds the tag needs nothing more, and nothing is compressed to find that out.
type Scripted struct {
	// Image and Files are what the image holds: the binary, and files beside it.
	Image ours.Image
	Files []ours.File
	// Version is the one the script built, from the binary's name (kueue-v0.17.0).
	Version string
	// Binary is the path of the binary in devctl's cache.
	Binary string
	// Ref is the image's tag.
	Ref string
	// Built says the script built the binary in this run, not found it in the cache.
	Built bool
}

// Build runs hack/build-kubernetes.sh what, which builds the binary the first time
// (minutes, cold), says so with lines starting "building ", and prints the binary's path last;
// progress hears its lines. It tags img, with files, for arch.
func Build(ctx context.Context, root, what string, img ours.Image, files []ours.File, arch string, progress func(string)) (*Scripted, error) {
	built := false
	path, err := scripts.Run(ctx, root, "hack/build-kubernetes.sh", []string{what}, func(line string) {
		built = built || strings.HasPrefix(line, "building ")
		progress(line)
	})
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", what, err)
	}
	binary, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Scripted{Image: img, Files: files, Version: strings.TrimPrefix(filepath.Base(path), what+"-"), Binary: path, Built: built}
	s.Ref = img.Name + ":" + s.Version + "-" + s.hash(binary, arch)
	return s, nil
}

// hash is the first 12 hex digits of a hash of what goes into the image.
func (s *Scripted) hash(binary []byte, arch string) string {
	sum := sha256.New()
	sum.Write(binary)
	fmt.Fprintf(sum, "\x00%s\x00/%s\x00%s", arch, s.Image.Path(), ours.User)
	for _, f := range s.Files {
		fmt.Fprintf(sum, "\x00%s\x00%o\x00", f.Path, f.Mode)
		sum.Write(f.Data)
	}
	return hex.EncodeToString(sum.Sum(nil))[:12]
}

// Assemble makes the image, to be tagged s.Ref.
func (s *Scripted) Assemble(arch string) (*ours.Built, error) {
	binary, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	return ours.Assemble(s.Image, binary, arch, s.Files...)
}

// WriteArchive assembles the image and writes it as a docker-archive tagged s.Ref: what a node's
// containerd imports, and what docker load reads.
func (s *Scripted) WriteArchive(w io.Writer, arch string) error {
	b, err := s.Assemble(arch)
	if err != nil {
		return fmt.Errorf("assembling %s: %w", s.Ref, err)
	}
	tag, err := name.NewTag(s.Ref)
	if err != nil {
		return err
	}
	return tarball.MultiRefWrite(map[name.Reference]v1.Image{tag: b.Img}, w)
}
