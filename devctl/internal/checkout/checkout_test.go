package checkout

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootFindsTheModule(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "operator", "config", "default", "kustomization.yaml")); err != nil {
		t.Errorf("Root %s is not the mlkube checkout: %v", root, err)
	}
}
