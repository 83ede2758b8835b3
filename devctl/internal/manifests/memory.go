package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Memory remembers, per object, what Apply last applied to it: the object's UID, the
// resourceVersion the apply left it at, and a hash of the manifest applied. An object whose UID
// and resourceVersion are still those, and whose manifest hashes the same, is exactly as that
// apply left it, and applying the same manifest again would change nothing: Apply skips it and
// counts it unchanged. Anything else (the object edited, even its status; recreated; a new
// manifest) applies as always. It saves the apiserver's work on large objects: a CRD's no-op
// apply costs a few hundred milliseconds.
//
// A Memory lives in a file, one per cluster; a nil *Memory remembers nothing.
type Memory struct {
	path    string
	mu      sync.Mutex
	entries map[string]applied
	changed bool
}

type applied struct {
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	Manifest        string `json:"manifest"`
}

// OpenMemory reads the memory kept in path; a missing or unreadable file is an empty memory.
func OpenMemory(path string) *Memory {
	m := &Memory{path: path, entries: map[string]applied{}}
	if data, err := os.ReadFile(path); err == nil {
		if json.Unmarshal(data, &m.entries) != nil {
			m.entries = map[string]applied{}
		}
	}
	return m
}

// Save writes the memory back to its file, when Apply changed it.
func (m *Memory) Save() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.changed {
		return nil
	}
	data, err := json.MarshalIndent(m.entries, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return err
	}
	tmp := m.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, m.path); err != nil {
		os.Remove(tmp)
		return err
	}
	m.changed = false
	return nil
}

// unchanged reports whether the live object (its UID and resourceVersion) is as the last apply
// of the same manifest left it.
func (m *Memory) unchanged(u *unstructured.Unstructured, live client.Object) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[memoryKey(u)]
	return ok && e.UID == string(live.GetUID()) && e.ResourceVersion == live.GetResourceVersion() && e.Manifest == manifestHash(u)
}

// remember records that applying u (the manifest) left the object at after.
func (m *Memory) remember(u, after *unstructured.Unstructured) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[memoryKey(u)] = applied{UID: string(after.GetUID()), ResourceVersion: after.GetResourceVersion(), Manifest: manifestHash(u)}
	m.changed = true
}

func memoryKey(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s", u.GroupVersionKind(), client.ObjectKeyFromObject(u))
}

// manifestHash is a hash of the manifest's JSON (map keys sorted: the same manifest, the same hash).
func manifestHash(u *unstructured.Unstructured) string {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
