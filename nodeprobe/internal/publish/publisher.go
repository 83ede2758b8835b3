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

// Publish annotates the node and updates the ConfigMap. Both are attempted; the errors of
// both are returned.
func (p *Publisher) Publish(ctx context.Context, r Report) error {
	summary := Summarize(r)
	var errs []error
	annotated, err := p.annotate(ctx, r.Node, summary)
	errs = append(errs, err)

	var cfg *accelerator.Config
	if r.Finding != nil && len(r.Finding.Config.Accelerators) > 0 {
		cfg = &r.Finding.Config
	}
	ch, err := p.record(ctx, r.Node, cfg)
	errs = append(errs, err)
	if err == nil && ch.wrote {
		p.Log.Info("accelerator config updated", "configMap", p.Namespace+"/"+p.Name,
			"published", ch.after.Published, "layouts", ch.after.summary())
		p.event(ctx, r.Node, ch)
	}
	if err == nil {
		errs = append(errs, p.prune(ctx, r.Node, ch.after))
	}
	if annotated {
		p.Log.Info("node annotated", "node", r.Node, "gpu", summary.GPU, "layout", summary.Layout)
	}
	return errors.Join(errs...)
}
