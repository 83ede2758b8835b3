package up

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
)

func TestClusterConfigFallsBackToTheBuiltIn(t *testing.T) {
	root := t.TempDir()
	data, from, err := clusterConfig(root, "", "builtin")
	if err != nil || string(data) != "builtin" || from != "built-in single-node config" {
		t.Errorf("no clusters/kind.yaml: %q from %q, %v", data, from, err)
	}

	if err := os.MkdirAll(filepath.Join(root, "clusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "clusters", "kind.yaml"), []byte("repo"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, from, err = clusterConfig(root, "", "builtin")
	if err != nil || string(data) != "repo" || from != "clusters/kind.yaml" {
		t.Errorf("with clusters/kind.yaml: %q from %q, %v", data, from, err)
	}

	if _, _, err := clusterConfig(root, filepath.Join(root, "nothere.yaml"), "builtin"); err == nil {
		t.Error("a --config file that does not exist was accepted")
	}
}

// devctl kind-config prints the config up creates a multi-node cluster from, over empty folders:
// a bare kind cluster made from it is of the same shape.
func TestKindConfigEmptiesTheNodesFolders(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "node-1", "10-flannel.conflist")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := KindConfig(2, dir, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "- role: "); got != 3 {
		t.Errorf("%d nodes, want 3:\n%s", got, out.String())
	}
	for _, node := range []string{"node-0", "node-1", "node-2"} {
		if !strings.Contains(out.String(), filepath.Join(dir, node)) {
			t.Errorf("no mount of %s:\n%s", node, out.String())
		}
		if entries, err := os.ReadDir(filepath.Join(dir, node)); err != nil || len(entries) != 0 {
			t.Errorf("%s: %d entries, %v; want an empty folder", node, len(entries), err)
		}
	}
}

func TestLoadedAndAliased(t *testing.T) {
	b, err := ours.Assemble(ours.Image{Name: "mlkube/trainer", Binary: "trainer"}, []byte("binary"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	// The node spells our images with the default registry in front.
	repo := b.Ref.Context().Name()
	tag, dev := repo+":"+b.Ref.TagStr(), repo+":dev"
	for _, tc := range []struct {
		name string
		have map[string]string
		want bool
	}{
		{"both tags, one image", map[string]string{tag: "sha256:a", dev: "sha256:a"}, true},
		{":dev names an older build", map[string]string{tag: "sha256:a", dev: "sha256:b"}, false},
		{"no :dev", map[string]string{tag: "sha256:a"}, false},
		{"not loaded", map[string]string{dev: "sha256:a"}, false},
	} {
		if got := loadedAndAliased(tc.have, b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An image kind publishes carries kindnet: given by --image, it must get the config that lets
// kind install it, not clusters/kind.yaml, which leaves the network to the offline image's flannel.
func TestKindsOwnImagesGetKindnet(t *testing.T) {
	for ref, want := range map[string]bool{
		"kindest/node:v1.34.0": true,
		"kindest/node:v1.34.0@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a": true,
		"localhost:5001/kindest/node:v1.34.0": true,
		"localhost:5001/kindest/node@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a": true,
		"mlkube/kind-node:v1.34.4":           false,
		"localhost:5001/mlkube/kind-node:v1": false,
		"example.com/kindest/node-fork:v1":   false,
	} {
		if got := kindsOwn(ref); got != want {
			t.Errorf("kindsOwn(%s) = %v, want %v", ref, got, want)
		}
	}

	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "clusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "clusters", "kind.yaml"), []byte("offline"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		image, want string
	}{
		{"kindest/node:v1.34.0", kindcluster.PublishedConfig},
		{"mlkube/kind-node:v1.34.4", "offline"},
	} {
		u := &up{root: root}
		data, from, err := u.config(nodeImage{ref: tc.image, published: kindsOwn(tc.image)})
		if err != nil || string(data) != tc.want {
			t.Errorf("--image %s: config from %q (%v):\n%s", tc.image, from, err, data)
		}
	}
}

// --workers names the pod network the nodes' image brings, whatever role the image plays.
func TestWorkersNameTheImagesNetwork(t *testing.T) {
	t.Setenv("MLKUBE_CACHE", t.TempDir()) // the nodes' network folders go there
	for image, want := range map[string]string{
		"kindest/node:v1.34.0":                        "kindnet",
		"mlkube/kind-node:v1.34.4":                    "flannel",
		"localhost:5001/mlkube-e2e/kind-node:v1.34.4": "flannel", // e2e's stand-in for kind's image
	} {
		u := &up{}
		u.opts.Name, u.opts.Workers = "t", 2
		_, from, err := u.config(nodeImage{ref: image, published: true})
		if err != nil || !strings.HasSuffix(from, ", "+want+")") {
			t.Errorf("--image %s --workers 2: %q, %v; want %s", image, from, err, want)
		}
	}
}
