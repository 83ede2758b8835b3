package commands

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mlkube/mlkube/devctl/internal/checkout"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
)

// devctlPackage is devctl's main package, relative to the checkout's root.
const devctlPackage = "./devctl/cmd/devctl"

// BuildOptions are the settings of `devctl build`.
type BuildOptions struct {
	// Out is the binary to write.
	Out string
	// IfChanged builds only when the key of devctl's sources is not the one the stamp beside Out
	// recorded for the binary Out is now.
	IfChanged bool
}

// Build builds devctl from the checkout into o.Out, for hack/up.sh, which then runs it. go build's
// own check that a program this size is up to date takes over a second on 2 cores, hashing the
// inputs (ours.ProgramKey), devctl's start included, less than half of that: with o.IfChanged,
// an unchanged key builds nothing.
func Build(ctx context.Context, o BuildOptions) error {
	root, err := checkout.Root()
	if err != nil {
		return err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return err
	}
	// The stamp also names the binary (size, time): one another build wrote is rebuilt once.
	stamp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".stamp")
	key, keyErr := ours.ProgramKey(ctx, root, devctlPackage)
	if o.IfChanged && keyErr == nil && readStamp(stamp) == key+" "+binaryID(out) {
		return nil
	}
	if err := os.Remove(stamp); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := goBuild(ctx, root, out); err != nil {
		return err
	}
	// Remembered unless a source changed during the build: then the next run builds again.
	if after, err := ours.ProgramKey(ctx, root, devctlPackage); keyErr == nil && err == nil && after == key {
		return os.WriteFile(stamp, []byte(key+" "+binaryID(out)+"\n"), 0o644)
	}
	return nil
}

// goBuild builds devctl into out through a new file renamed over it: a devctl that runs from out
// meanwhile (the one building) keeps its binary.
func goBuild(ctx context.Context, root, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".devctl-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, filepath.Base(out))
	// -trimpath: the build cache then keys devctl's compiled packages by their modules' versions,
	// not by where the module cache is, so a build with another module cache (CI's first step
	// has a fresh one each run) compiles nothing again: 114 s on 2 cores without it.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, devctlPackage)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", devctlPackage, err)
	}
	return os.Rename(bin, out)
}

func readStamp(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

// binaryID tells one binary at path from another: its size and time; "none" when there is none.
func binaryID(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "none"
	}
	return fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
}
