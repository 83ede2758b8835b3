package publish

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
	"github.com/mlkube/mlkube/operator/accelerator"
)

// The ConfigMap's keys.
const (
	// KeyConfig is what the operator reads (operator/accelerator's format).
	KeyConfig = "accelerators.yaml"
	// KeyLayouts is nodeprobe's record of which node reported which layout (State).
	KeyLayouts = "layouts.yaml"
	// KeyConflicts is there only while GPU nodes disagree (Conflicts).
	KeyConflicts = "conflicts.yaml"
)

// managedResources are the config entries nodeprobe owns; entries for other resources (an
// amd.com/gpu written by hand) are kept as they are.
var managedResources = []string{driver.Resource, driver.LegacyResource}

// conflictBackoff spaces out retries after a resourceVersion conflict. When a DaemonSet rolls out,
// every GPU node writes its record at about the same time; client-go's default of 4 tries is
// soon used up by the others' writes, and the jitter keeps the retries from colliding again.
var conflictBackoff = wait.Backoff{Steps: 12, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 1, Cap: 2 * time.Second}

// change is what one update did, for events.
type change struct {
	cm              *corev1.ConfigMap
	before, after   State
	wrote, conflict bool
	// held says why a degraded layout was not recorded ("" when it was, or was not degraded).
	held string
}

// record updates the ConfigMap with this node's layout (cfg nil: the node has none; degraded:
// see Publish). Every write is a read-modify-write guarded by the resourceVersion read, so two
// nodes writing at once cannot lose each other's record: the loser gets a conflict, reads again
// and retries.
func (p *Publisher) record(ctx context.Context, node string, cfg *accelerator.Config, degraded bool) (change, error) {
	var ch change
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		ch = change{}
		var cm corev1.ConfigMap
		err := p.Client.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			if cfg == nil {
				return nil // a node without a GPU creates nothing
			}
			cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Namespace: p.Namespace, Name: p.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "nodeprobe"},
			}}
			if err := p.apply(&cm, node, cfg, degraded, &ch); err != nil || !ch.wrote {
				return err
			}
			err := p.Client.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				// Another node created it first: read theirs and add ours.
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, p.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if err := p.apply(&cm, node, cfg, degraded, &ch); err != nil || !ch.wrote {
			return err
		}
		return p.Client.Update(ctx, &cm)
	})
	if err != nil {
		return ch, fmt.Errorf("updating ConfigMap %s: %w", key, err)
	}
	return ch, nil
}

// apply computes the ConfigMap's new data in place and says in ch whether it changed.
func (p *Publisher) apply(cm *corev1.ConfigMap, node string, cfg *accelerator.Config, degraded bool, ch *change) error {
	var state State
	if data := cm.Data[KeyLayouts]; data != "" {
		if err := yaml.Unmarshal([]byte(data), &state); err != nil {
			// Unreadable (edited by hand?): start the record again; every node re-reports
			// within one interval.
			p.Log.Info("ignoring an unreadable record of layouts; starting it again", "key", KeyLayouts, "error", err.Error())
			state = State{}
		}
	}
	ch.before = copyState(state)
	if degraded && cfg != nil {
		if has, gets := driverFiles(cm.Data[KeyConfig]), accelerator.HostPaths(cfg.Accelerators[driver.Resource]); gets < has {
			// The node's earlier record, if any, stays: it still counts for the layout it
			// reported while its driver was intact.
			ch.held = fmt.Sprintf("this probe met problems and its config mounts %d driver files, fewer than the %d of the published %s, which is kept", gets, has, KeyConfig)
		}
	}
	if ch.held == "" {
		state.Record(node, cfg)
	}
	chosen := state.Choose()

	data := maps.Clone(cm.Data)
	if data == nil {
		data = map[string]string{}
	}
	if chosen != "" {
		published, err := withLayout(data[KeyConfig], state.Layouts[chosen].Config, chosen)
		if err != nil {
			return err
		}
		data[KeyConfig] = published
	}
	// With no layout left, accelerators.yaml stays as it is. A record that never held a layout
	// is not started: a node without a GPU leaves the operator's ConfigMap as it found it.
	if _, had := data[KeyLayouts]; had || len(state.Layouts) > 0 || state.Published != "" {
		out, err := yaml.Marshal(state)
		if err != nil {
			return err
		}
		data[KeyLayouts] = string(out)
	}
	if c := state.Conflicts(); c != nil {
		out, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		data[KeyConflicts] = string(out)
		ch.conflict = true
	} else {
		delete(data, KeyConflicts)
	}
	ch.after = state
	ch.cm = cm
	if maps.Equal(data, cm.Data) {
		return nil
	}
	cm.Data = data
	ch.wrote = true
	return nil
}

// withLayout is the config in current with nodeprobe's resources replaced by layout's, each
// selecting the nodes labelled with the layout's id. A current config the operator would refuse
// is replaced whole.
func withLayout(current string, layout accelerator.Config, id string) (string, error) {
	merged := accelerator.Config{Accelerators: map[string]accelerator.Accelerator{}}
	if cur, err := accelerator.Parse([]byte(current)); current != "" && err == nil {
		maps.Copy(merged.Accelerators, cur.Accelerators)
	}
	for _, r := range managedResources {
		delete(merged.Accelerators, r)
	}
	for res, a := range layout.Accelerators {
		a.NodeSelector = map[string]string{accelerator.LayoutLabel: id}
		merged.Accelerators[res] = a
	}
	out, err := yaml.Marshal(merged)
	return string(out), err
}

// driverFiles counts the host paths a published config mounts for nvidia.com/gpu: a config
// the operator would refuse mounts none.
func driverFiles(published string) int {
	cfg, err := accelerator.Parse([]byte(published))
	if published == "" || err != nil {
		return 0
	}
	return accelerator.HostPaths(cfg.Accelerators[driver.Resource])
}

func copyState(s State) State {
	out := State{Published: s.Published, Layouts: map[string]*Layout{}}
	for id, l := range s.Layouts {
		out.Layouts[id] = &Layout{Nodes: append([]string(nil), l.Nodes...), Config: l.Config}
	}
	return out
}
