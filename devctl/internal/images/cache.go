package images

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Cache remembers which image each Key gave: one small file per key, holding the image's
// reference. The reference names the image by its digest, so a node that holds it under that
// name holds exactly that image, and the build can be skipped.
type Cache struct {
	// Dir holds the files; it is made when first written to.
	Dir string
}

// cacheKeep is how many entries a Cache keeps: the newest, when it holds more than twice as many.
const cacheKeep = 100

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

// prune removes the oldest entries when there are more than twice cacheKeep.
func (c Cache) prune() error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil || len(entries) <= 2*cacheKeep {
		return err
	}
	type aged struct {
		name string
		mod  int64
	}
	var all []aged
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			all = append(all, aged{e.Name(), info.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(b.mod, a.mod) })
	var errs []error
	for _, e := range all[min(cacheKeep, len(all)):] {
		if err := os.Remove(filepath.Join(c.Dir, e.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
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
