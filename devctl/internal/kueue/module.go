package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleDir is the folder of Kueue's module at version in the Go module cache, which holds its
// chart (charts/kueue). go mod download in hack/kueue fetches the module when the cache lacks it
// (the build has fetched it, unless the cache was cleaned since); else it answers at once.
func ModuleDir(ctx context.Context, root, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+version)
	cmd.Dir = filepath.Join(root, "hack", "kueue")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", Module, version, info.Error)
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("go mod download %s@%s: %w", Module, version, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s named no folder", Module, version)
	}
	return info.Dir, nil
}

// ChartDir is Kueue's chart in its module's folder.
func ChartDir(moduleDir string) string { return filepath.Join(moduleDir, "charts", "kueue") }
