// Package scripts runs the checkout's build scripts (the node image's, hack/build-kubernetes.sh)
// and other long commands (docker pull) from devctl: what they print while they work becomes
// devctl's progress, and a script's answer (a path, an image tag) is the last word of its stdout.
package scripts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
	var out strings.Builder
	cmd.Stdout = &out
	if err := follow(cmd, script, said); err != nil {
		return "", err
	}
	fields := strings.Fields(out.String())
	if len(fields) == 0 {
		return "", errors.New(script + " printed no answer")
	}
	return fields[len(fields)-1], nil
}

// Command runs program with args; each non-empty line it prints, on stdout or stderr, goes to
// said. When it fails, the error holds its last ten lines.
func Command(ctx context.Context, program string, args []string, said func(line string)) error {
	return follow(exec.CommandContext(ctx, program, args...), program, said)
}

// follow runs cmd, reading its stderr (and its stdout, unless that is taken) line by line.
func follow(cmd *exec.Cmd, name string, said func(line string)) error {
	r, w := io.Pipe()
	cmd.Stderr = w
	if cmd.Stdout == nil {
		cmd.Stdout = w
	}
	var last []string // the command's last words, for an error
	read := make(chan struct{})
	go func() {
		defer close(read)
		lines := bufio.NewScanner(r)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			if line == "" {
				continue
			}
			said(line)
			last = append(last[max(0, len(last)-9):], line)
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	err := cmd.Run()
	w.Close()
	<-read
	if err != nil {
		return fmt.Errorf("%s failed (%w); its last lines:\n  %s", name, err, strings.Join(last, "\n  "))
	}
	return nil
}
