// Package scripts runs the checkout's build scripts (the node image's, hack/build-kubernetes.sh)
// from devctl: what they print on stderr while they work becomes devctl's progress, and the last
// word they print on stdout is their answer (a path, an image tag).
package scripts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Run runs script (relative to root) with args in root. Each non-empty line it prints on stderr
// goes to said; its answer is the last word of its stdout. When it fails, the error holds its
// last ten lines.
func Run(ctx context.Context, root, script string, args []string, said func(line string)) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, script), args...)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("running %s: %w", script, err)
	}
	var last []string // the script's last words, for an error
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		said(line)
		last = append(last[max(0, len(last)-9):], line)
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("%s failed (%w); its last lines:\n  %s", script, err, strings.Join(last, "\n  "))
	}
	fields := strings.Fields(out.String())
	if len(fields) == 0 {
		return "", errors.New(script + " printed no answer")
	}
	return fields[len(fields)-1], nil
}
