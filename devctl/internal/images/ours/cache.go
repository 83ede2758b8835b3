package ours

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Cache remembers which image each Key gave: one small file per key, holding the image's
// reference. The reference names the image by its digest, so a node that holds it under that
// name holds exactly that image, and the build can be skipped. For the newest keys it also keeps
// the image itself (<key>.tar), so a new cluster gets unchanged sources' images without a build.
type Cache struct {
	// Dir holds the files; it is made when first written to.
	Dir string
}

// cacheKeep is how many entries a Cache keeps: the newest, when it holds more than twice as many.
const cacheKeep = 100

// imagesKeep is how many images a Cache keeps, the newest: two builds of each of our images
// (37 MB for all four).
const imagesKeep = 8

// imageSuffix ends the name of a kept image's file.
const imageSuffix = ".tar"

// Lookup returns the reference of img's image that key gave, when one was stored.
func (c Cache) Lookup(img Image, key string) (name.Tag, bool) {
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		return name.Tag{}, false
	}
	ref, err := name.NewTag(strings.TrimSpace(string(data)))
	if err != nil || ref.Context().RepositoryStr() != mustRepository(img.Name) {
		return name.Tag{}, false
	}
	return ref, true
}

// Store records that key gave the image ref.
func (c Cache) Store(key string, ref name.Tag) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(tmp, ref.String())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path(key))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return c.prune()
}

// StoreImage keeps b, the image key gave, beside the reference Store records.
func (c Cache) StoreImage(key string, b *Built) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, ".tmp-*")
	if err != nil {
		return err
	}
	err = tarball.Write(b.Ref, b.Img, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path(key)+imageSuffix)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return c.pruneImages()
}

// LoadImage returns img's image that key gave, when Store recorded its reference and StoreImage
// kept it, and the kept file still holds the image that reference names.
func (c Cache) LoadImage(img Image, key string) (*Built, bool) {
	ref, ok := c.Lookup(img, key)
	if !ok {
		return nil, false
	}
	kept, err := tarball.ImageFromPath(c.path(key)+imageSuffix, &ref)
	if err != nil {
		return nil, false
	}
	digest, err := kept.Digest()
	if err != nil || !strings.HasPrefix(digest.Hex, ref.TagStr()) {
		return nil, false
	}
	// The image is read from the file when it is written out, later: marked as the newest, the
	// file outlives the pruning that storing other images does meanwhile (pruneImages keeps the
	// newest), as it did not when it was among the oldest.
	now := time.Now()
	if err := os.Chtimes(c.path(key)+imageSuffix, now, now); err != nil {
		return nil, false
	}
	return &Built{Image: img, Ref: ref, Img: kept}, true
}

// prune removes the oldest entries when there are more than twice cacheKeep.
func (c Cache) prune() error {
	all, err := c.newestFirst(func(name string) bool { return !strings.HasSuffix(name, imageSuffix) })
	if err != nil || len(all) <= 2*cacheKeep {
		return err
	}
	return removeAll(c.Dir, all[cacheKeep:])
}

// pruneImages removes all but the imagesKeep newest images.
func (c Cache) pruneImages() error {
	all, err := c.newestFirst(func(name string) bool { return strings.HasSuffix(name, imageSuffix) })
	if err != nil || len(all) <= imagesKeep {
		return err
	}
	return removeAll(c.Dir, all[imagesKeep:])
}

// newestFirst lists the files of c.Dir that match, the newest first.
func (c Cache) newestFirst(match func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return nil, err
	}
	type aged struct {
		name string
		mod  int64
	}
	var all []aged
	for _, e := range entries {
		if !match(e.Name()) || strings.HasPrefix(e.Name(), ".tmp-") {
			continue
		}
		if info, err := e.Info(); err == nil && !e.IsDir() {
			all = append(all, aged{e.Name(), info.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(b.mod, a.mod) })
	names := make([]string, len(all))
	for i, a := range all {
		names[i] = a.name
	}
	return names, nil
}

func removeAll(dir string, names []string) error {
	var errs []error
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c Cache) path(key string) string { return filepath.Join(c.Dir, key) }

// mustRepository is the repository part of an image name as a parsed reference spells it.
func mustRepository(image string) string {
	repo, err := name.NewRepository(image)
	if err != nil {
		return image
	}
	return repo.RepositoryStr()
}
