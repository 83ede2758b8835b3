package docker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
)

// Memory remembers, for each node container (by its ID), the image ID each name had there when
// devctl last listed the node or loaded into it. Listing a node is a docker exec, 0.1 to 0.5 s on
// a busy 2-core machine; with the memory, devctl run knows at once that there is nothing to load
// and creates the job while the listing runs on, to catch what the memory cannot see (an image
// removed by the kubelet's garbage collection, or replaced by hand). A node created again has
// another container ID, so nothing of an older cluster of the same name is believed.
type Memory struct {
	path string
	mu   sync.Mutex
	// Nodes: node container ID → image name in full → image ID.
	Nodes map[string]map[string]string `json:"nodes"`
}

// OpenMemory reads the memory kept in path; one that cannot be read is empty.
func OpenMemory(path string) *Memory {
	m := &Memory{path: path}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, m) // a memory that does not read only costs a listing
	}
	if m.Nodes == nil {
		m.Nodes = map[string]map[string]string{}
	}
	return m
}

// Covers reports whether every pod node held every image the last time devctl looked; false
// for a nil Memory.
func (m *Memory) Covers(pods []kindcluster.NodeContainer, imgs []Image) bool {
	if m == nil || len(pods) == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range pods {
		for _, img := range imgs {
			if m.Nodes[n.ID][img.Name] != img.ID {
				return false
			}
		}
	}
	return true
}

// Learn records what a listing of the pod nodes found (plan, by node name; pods gives their
// container IDs), and forgets nodes that are no longer pods of the cluster.
func (m *Memory) Learn(pods []kindcluster.NodeContainer, plan *Plan) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := map[string]map[string]string{}
	for _, n := range pods {
		names := m.Nodes[n.ID]
		if names == nil {
			names = map[string]string{}
		}
		for _, img := range plan.Holding[n.Name] {
			names[img.Name] = img.ID
		}
		for _, img := range plan.Lacking[n.Name] {
			delete(names, img.Name)
		}
		kept[n.ID] = names
	}
	m.Nodes = kept
}

// Loaded records that imgs were loaded into the nodes named.
func (m *Memory) Loaded(pods []kindcluster.NodeContainer, names []string, imgs []Image) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range pods {
		for _, loaded := range names {
			if n.Name != loaded {
				continue
			}
			if m.Nodes[n.ID] == nil {
				m.Nodes[n.ID] = map[string]string{}
			}
			for _, img := range imgs {
				m.Nodes[n.ID][img.Name] = img.ID
			}
		}
	}
}

// Save writes the memory to its file, whole or not at all.
func (m *Memory) Save() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	data, err := json.MarshalIndent(m, "", "  ")
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(m.path), ".loaded-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), m.path)
}
