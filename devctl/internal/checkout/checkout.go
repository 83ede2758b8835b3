// Package checkout finds the mlkube checkout devctl runs in, which it builds from, and names its
// version.
package checkout

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// module is the Go module devctl builds our programs from.
const module = "github.com/mlkube/mlkube"

// Root finds the mlkube checkout at or above the working directory: the images are built from
// its source, and its clusters/kind.yaml is the default cluster config.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("devctl builds mlkube from source: run it inside an mlkube checkout (no go.mod of " + module + " here or above)")
		}
		dir = parent
	}
}

func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Version names the checkout's source the way `make build` does: the git description with
// "-dirty" for uncommitted changes, or "dev" outside git.
func Version(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "dev"
}
