// Package load takes images into a kind cluster's nodes the way devctl does it, for devctl up's
// images and for those devctl load and run take from the local Docker engine: one archive,
// loaded into every node at once.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// Archive writes one archive with write, then loads it into every node of targets at once, each
// a task of the step, and removes it. refs say what the archive holds.
func Archive(ctx context.Context, refs []string, write func(io.Writer) error, targets []nodes.Node) error {
	p := steps.From(ctx)
	task := p.Start("writing the archive of " + strings.Join(refs, ", "))
	archive, size, err := WriteFile(write)
	if err != nil {
		task.Fail()
		return err
	}
	defer os.Remove(archive)
	task.Done("wrote the archive (%.1f MB)", float64(size)/1e6)
	// Every node at once: each load is mostly the node's containerd unpacking, and a cluster of
	// several nodes would otherwise pay for them one after the other.
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return err
		}
		task := p.Start(fmt.Sprintf("loading it into node %s", n))
		wg.Go(func() {
			if errs[i] = kindcluster.LoadArchive(n, archive); errs[i] != nil {
				task.Fail()
				return
			}
			task.Done("")
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WriteFile has write write a docker-archive into a new file, and returns its path and size. The
// caller removes the file.
func WriteFile(write func(io.Writer) error) (string, int64, error) {
	f, err := os.CreateTemp("", "devctl-images-*.tar")
	if err != nil {
		return "", 0, err
	}
	err = write(f)
	if err != nil {
		err = fmt.Errorf("writing the image archive: %w", err)
	}
	size, serr := f.Seek(0, io.SeekCurrent)
	if err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), size, nil
}
