package publish

import (
	"context"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// prune forgets nodes that are gone. A node deleted from the cluster (scaled down, replaced)
// cannot remove its own record, and stale records would pile up in layouts.yaml and outvote
// the live nodes. nodeprobe may not list nodes, so each probe checks one other recorded node,
// picked at random: across the DaemonSet every record is checked about once per interval, at
// the cost of one GET per probe.
func (p *Publisher) prune(ctx context.Context, self string, state State) error {
	var others []string
	for _, l := range state.Layouts {
		for _, n := range l.Nodes {
			if n != self {
				others = append(others, n)
			}
		}
	}
	if len(others) == 0 {
		return nil
	}
	node := others[rand.IntN(len(others))]
	err := p.Client.Get(ctx, types.NamespacedName{Name: node}, &corev1.Node{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	ch, err := p.record(ctx, node, nil, false)
	if err == nil && ch.wrote {
		p.Log.Info("forgot a node that no longer exists", "node", node, "published", ch.after.Published)
		p.event(ctx, self, ch)
	}
	return err
}
