package up

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mlkube/mlkube/devctl/internal/images"
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

func TestLoadedAndAliased(t *testing.T) {
	b, err := images.Assemble(images.Image{Name: "mlkube/trainer", Binary: "trainer"}, []byte("binary"), "amd64")
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
