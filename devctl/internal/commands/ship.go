package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// shipArchive writes one archive with write, then loads it into every node of targets at once,
// each a task of the step, and removes it. refs say what the archive holds.
func shipArchive(ctx context.Context, refs []string, write func(io.Writer) error, targets []nodes.Node) error {
	p := steps.From(ctx)
	task := p.Start("writing the archive of " + strings.Join(refs, ", "))
	archive, size, err := writeArchive(write)
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

// ours writes our built images, under their content tags and the :dev alias, as an archive.
func ours(built []*images.Built) func(io.Writer) error {
	return func(w io.Writer) error { return images.WriteArchive(w, built...) }
}
