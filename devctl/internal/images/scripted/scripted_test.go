package scripted

import (
	"testing"

	"github.com/mlkube/mlkube/devctl/internal/images/ours"
)

// A scripted image's tag changes with what goes into the image (the binary, the architecture,
// a file beside the binary), and only with it.
func TestScriptedTagFollowsTheContent(t *testing.T) {
	s := func(data string) *Scripted {
		return &Scripted{Image: ours.Image{Name: "mlkube/registry", Binary: "registry", Dir: "bin"}, Files: []ours.File{{Path: "etc/config.yml", Mode: 0o644, Data: []byte(data)}}}
	}
	a := s("x").hash([]byte("binary"), "amd64")
	if len(a) != 12 || s("x").hash([]byte("binary"), "amd64") != a {
		t.Fatalf("hash %q: want 12 hex digits, the same each time", a)
	}
	for what, other := range map[string]string{
		"another binary":       s("x").hash([]byte("binary2"), "amd64"),
		"another architecture": s("x").hash([]byte("binary"), "arm64"),
		"another file":         s("y").hash([]byte("binary"), "amd64"),
	} {
		if other == a {
			t.Errorf("%s gave the same tag", what)
		}
	}
}
