// Package publish is nodeprobe's DaemonSet side: each node's pod records what it found on its
// own Node (an annotation) and in the one ConfigMap the operator reads the accelerator config
// from, without ever losing another node's record or replacing a good config with an empty one.
package publish

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
	"github.com/mlkube/mlkube/operator/accelerator"
)

// Publisher writes one node's reports.
type Publisher struct {
	Client client.Client
	// Namespace and Name are the ConfigMap's.
	Namespace, Name string
	Log             logr.Logger
}

// Report is one probe of one node.
type Report struct {
	Node string
	// Finding is nil when the node has no usable driver; NoGPUReason then says why.
	Finding     *driver.Finding
	NoGPUReason string
}

// Publish updates the ConfigMap and annotates the node. Both are attempted; the errors of
// both are returned.
//
// A degraded finding (the probe skipped broken driver files or could not read the ld.so.cache)
// may lack files the driver has. It is worse than the config already published when it mounts
// fewer driver files than accelerators.yaml mounts for nvidia.com/gpu; then it is not recorded,
// the ConfigMap stays as it is, and the annotation and a warning event say why. A degraded
// finding that is no worse (nothing published yet, or as many volumes) is recorded as usual,
// with the same warning event.
func (p *Publisher) Publish(ctx context.Context, r Report) error {
	var cfg *accelerator.Config
	if r.Finding != nil && len(r.Finding.Config.Accelerators) > 0 {
		cfg = &r.Finding.Config
	}
	degraded := r.Finding != nil && r.Finding.Degraded()
	var errs []error
	ch, err := p.record(ctx, r.Node, cfg, degraded)
	errs = append(errs, err)
	if err == nil && ch.wrote {
		p.Log.Info("accelerator config updated", "configMap", p.Namespace+"/"+p.Name,
			"published", ch.after.Published, "layouts", ch.after.summary())
		p.event(ctx, r.Node, ch)
	}
	if ch.held != "" {
		p.Log.Info("degraded probe not published", "node", r.Node, "why", ch.held, "warnings", r.Finding.Warnings)
	}
	if err == nil {
		errs = append(errs, p.prune(ctx, r.Node, ch.after))
	}

	summary := Summarize(r)
	summary.NotPublished = ch.held
	annotated, err := p.annotate(ctx, r.Node, summary)
	errs = append(errs, err)
	if annotated {
		p.Log.Info("node annotated", "node", r.Node, "gpu", summary.GPU, "layout", summary.Layout)
		// Once per new finding, not every probe: the annotation changed only now.
		if degraded && ch.cm != nil {
			p.degradedEvent(ctx, r, ch)
		}
	}
	return errors.Join(errs...)
}
