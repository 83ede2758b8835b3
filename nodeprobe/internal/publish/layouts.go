package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mlkube/mlkube/operator/accelerator"
)

// The operator reads one accelerator config for the whole cluster, but every node reports its
// own. Nodes whose drivers sit at the same paths report the same config, a "layout"; nodes
// that disagree are not merged (a merged config would mount paths that exist on neither kind
// of node, or both sets on each). Instead the ConfigMap remembers which node reported which
// layout (layouts.yaml) and publishes one layout in accelerators.yaml:
//
//   - the layout most GPU nodes report, so that the fewest GPU containers get wrong paths;
//   - on a tie, the layout already published stays, so the config does not flap while nodes
//     come and go; with none published yet, the lowest layout ID (any fixed rule would do);
//   - with no GPU node left, accelerators.yaml keeps what it has: an empty config must never
//     replace a good one.
//
// When several layouts are recorded, conflicts.yaml says which nodes are on which.

// Layout is one config and the nodes that report it.
type Layout struct {
	Nodes  []string           `json:"nodes"`
	Config accelerator.Config `json:"config"`
}

// State is what layouts.yaml holds.
type State struct {
	// Published is the ID of the layout in accelerators.yaml.
	Published string             `json:"published,omitempty"`
	Layouts   map[string]*Layout `json:"layouts"`
}

// LayoutID names a config by its content: equal configs, equal IDs, on every node.
func LayoutID(cfg accelerator.Config) string {
	data, _ := json.Marshal(cfg) // map keys sorted: stable
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

// Record makes node report cfg, or nothing when cfg is nil (the node has no GPU, or no
// longer). It says whether anything changed.
func (s *State) Record(node string, cfg *accelerator.Config) bool {
	if s.Layouts == nil {
		s.Layouts = map[string]*Layout{}
	}
	want := ""
	if cfg != nil {
		want = LayoutID(*cfg)
	}
	changed := false
	for id, l := range s.Layouts {
		if i := slices.Index(l.Nodes, node); i >= 0 && id != want {
			l.Nodes = slices.Delete(l.Nodes, i, i+1)
			changed = true
		}
		if len(l.Nodes) == 0 {
			delete(s.Layouts, id)
			changed = true
		}
	}
	if cfg == nil {
		return changed
	}
	l, ok := s.Layouts[want]
	if !ok {
		l = &Layout{Config: *cfg}
		s.Layouts[want] = l
	}
	if !slices.Contains(l.Nodes, node) {
		l.Nodes = append(l.Nodes, node)
		sort.Strings(l.Nodes)
		changed = true
	}
	return changed
}

// Choose picks the layout to publish (see the rules above) and records it in Published. With
// no layouts it returns "" and leaves Published as it was.
func (s *State) Choose() string {
	if len(s.Layouts) == 0 {
		return ""
	}
	best := ""
	for _, id := range s.ids() {
		if best == "" || len(s.Layouts[id].Nodes) > len(s.Layouts[best].Nodes) {
			best = id
		}
	}
	if cur, ok := s.Layouts[s.Published]; ok && len(cur.Nodes) == len(s.Layouts[best].Nodes) {
		best = s.Published
	}
	s.Published = best
	return best
}

// ids are the layout IDs in order.
func (s *State) ids() []string {
	var ids []string
	for id := range s.Layouts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Conflicts is what conflicts.yaml holds when GPU nodes disagree.
type Conflicts struct {
	Message   string `json:"message"`
	Published string `json:"published"`
	// Nodes maps every GPU node to the ID of its layout.
	Nodes map[string]string `json:"nodes"`
	// Layouts lists each layout's host paths, to see at a glance how they differ.
	Layouts map[string][]string `json:"layouts"`
}

// Conflicts describes the disagreement, or returns nil when there is none.
func (s *State) Conflicts() *Conflicts {
	if len(s.Layouts) < 2 {
		return nil
	}
	c := &Conflicts{Published: s.Published, Nodes: map[string]string{}, Layouts: map[string][]string{}}
	total := 0
	for id, l := range s.Layouts {
		total += len(l.Nodes)
		for _, n := range l.Nodes {
			c.Nodes[n] = id
		}
		c.Layouts[id] = hostPaths(l.Config)
	}
	c.Message = fmt.Sprintf("GPU nodes disagree on where the NVIDIA driver is: %d layouts. accelerators.yaml holds layout %s, "+
		"reported by %d of %d GPU nodes; GPU containers on the other nodes get driver paths that are wrong there. "+
		"Install the driver the same way on every GPU node; layouts.yaml has each layout in full.",
		len(s.Layouts), s.Published, len(s.Layouts[s.Published].Nodes), total)
	return c
}

// hostPaths are what a layout mounts; a layout whose runtime gives the driver mounts nothing,
// and says so.
func hostPaths(cfg accelerator.Config) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range cfg.Accelerators {
		if a.Runtime != "" && !seen[a.Runtime] {
			seen[a.Runtime] = true
			out = append(out, "runtime: "+a.Runtime)
		}
		for _, v := range a.Volumes {
			if !seen[v.HostPath] {
				seen[v.HostPath] = true
				out = append(out, v.HostPath)
			}
		}
	}
	sort.Strings(out)
	return out
}

// summary is "id (n nodes), ..." for events.
func (s *State) summary() string {
	var parts []string
	for _, id := range s.ids() {
		parts = append(parts, fmt.Sprintf("%s (%s)", id, strings.Join(s.Layouts[id].Nodes, ", ")))
	}
	return strings.Join(parts, "; ")
}
