package ours

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// keySchema changes whenever what Key hashes, or how Build builds, changes: every image is
// then rebuilt once.
const keySchema = "mlkube-image-key/1"

// Key is a hash of everything that goes into img's image when Build builds it with opts, without
// building it: the source files of its package and of every package of this module (or of a
// module replaced by a local directory) that it imports, directly or not, as go list selects them
// for the target (build tags, cgo); the module path and version of every other module it
// imports from (the module cache never changes a version's files); go.mod and go.sum; the Go
// toolchain and the go environment that shapes a build; the build flags, with the version for a
// program that embeds one; and for a cgo image the C compiler and the build host's C libraries
// that go into its base layer.
//
// Two calls on unchanged sources give the same key; a change to any of those inputs gives
// another. A file's contents count, not its time: touching a file, or editing it and back,
// leaves the key as it was. Go's own build cache still decides what to compile; the key only
// lets devctl skip a build whose image it already made and loaded.
func Key(ctx context.Context, opts Options, img Image) (string, error) {
	b, err := newBuild(opts, img)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nimage %q %q %q %q cgo=%t libraries=%q\n", keySchema, img.Name, img.Package, img.Binary, img.Dir, img.CGO, img.Libraries)
	fmt.Fprintf(h, "env %q\nflags %q\n", b.env, b.args(""))

	goEnv, err := hashSources(ctx, h, opts.Dir, b.env, img.Package, keyEnv)
	if err != nil {
		return "", err
	}
	if img.CGO {
		if err := hashC(h, opts.Arch, goEnv["CC"], img.Libraries); err != nil {
			return "", fmt.Errorf("%s: %w", img.Name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ProgramKey is Key for a program of the module at dir that a plain `go build pkg` builds for
// this machine (devctl itself): a hash of the same sources, module versions, toolchain and go
// environment, GOOS, GOARCH and CGO_ENABLED as go sees them included.
func ProgramKey(ctx context.Context, dir, pkg string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nprogram %q\n", keySchema, pkg)
	if _, err := hashSources(ctx, h, dir, nil, pkg, slices.Concat(keyEnv, []string{"GOOS", "GOARCH", "CGO_ENABLED"})); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashSources writes into h what the go environment vars say, under the build env, and what
// goes into pkg: go.mod and go.sum, the files of each package of the module (or of a module
// replaced by a local directory) it imports, the versions of the other modules. It returns the
// go environment.
func hashSources(ctx context.Context, h io.Writer, dir string, env []string, pkg string, vars []string) (map[string]string, error) {
	goEnv, err := goEnv(ctx, dir, env, vars)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(h, "go env %q\n", goEnv)
	for _, f := range []string{"go.mod", "go.sum", goEnv["GOWORK"]} {
		if f == "" || f == "off" {
			continue
		}
		if err := hashFile(h, "module file", filepath.Join(dir, f)); err != nil && (f != "go.sum" || !errors.Is(err, os.ErrNotExist)) {
			return nil, err
		}
	}

	pkgs, err := listDeps(ctx, dir, env, pkg)
	if err != nil {
		return nil, err
	}
	modules := map[string]bool{}
	for _, p := range pkgs {
		switch {
		case p.Standard:
			// The toolchain's own: GOVERSION covers them.
		case p.Module == nil || p.Module.Main || p.Module.Replace != nil && p.Module.Replace.Version == "":
			// Ours, or a local directory: its files, as this build selects them.
			fmt.Fprintf(h, "package %s\n", p.ImportPath)
			for _, name := range p.files() {
				if err := hashFile(h, "file "+filepath.ToSlash(name), filepath.Join(p.Dir, name)); err != nil {
					return nil, err
				}
			}
		default:
			m := p.Module.Path + "@" + p.Module.Version
			if r := p.Module.Replace; r != nil {
				m += " => " + r.Path + "@" + r.Version
			}
			modules[m] = true
		}
	}
	for _, m := range slices.Sorted(maps.Keys(modules)) {
		fmt.Fprintf(h, "module %s\n", m)
	}
	return goEnv, nil
}

// listedPackage is what Key reads of a package from `go list -json`.
type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *struct {
		Path, Version string
		Main          bool
		Replace       *struct{ Path, Version string }
	}
	GoFiles, CgoFiles, CFiles, CXXFiles, MFiles, HFiles, FFiles, SFiles []string
	SwigFiles, SwigCXXFiles, SysoFiles, EmbedFiles                      []string
	Error                                                               *struct{ Err string }
}

// files are the package's files that go into a build, relative to its directory, sorted.
func (p *listedPackage) files() []string {
	var all []string
	for _, l := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.MFiles, p.HFiles, p.FFiles, p.SFiles, p.SwigFiles, p.SwigCXXFiles, p.SysoFiles, p.EmbedFiles} {
		all = append(all, l...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// listFields are the fields Key asks go list for: fewer fields, less work for go list.
const listFields = "ImportPath,Dir,Standard,Module,GoFiles,CgoFiles,CFiles,CXXFiles,MFiles,HFiles,FFiles,SFiles,SwigFiles,SwigCXXFiles,SysoFiles,EmbedFiles,Error"

// listDeps lists pkg and every package it imports, directly or not, for the build env.
func listDeps(ctx context.Context, dir string, env []string, pkg string) ([]*listedPackage, error) {
	out, err := goCommand(ctx, dir, env, "list", "-deps", "-json="+listFields, pkg)
	if err != nil {
		return nil, err
	}
	var pkgs []*listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := &listedPackage{}
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("go list %s: no packages", pkg)
	}
	return pkgs, nil
}

// keyEnv are the go environment variables that shape a build beyond GOOS, GOARCH and
// CGO_ENABLED, which the build sets itself.
var keyEnv = []string{"GOVERSION", "GOFLAGS", "GOEXPERIMENT", "GOAMD64", "GOARM64", "GOWORK", "GOTOOLCHAIN",
	"CC", "CXX", "CGO_CFLAGS", "CGO_CPPFLAGS", "CGO_CXXFLAGS", "CGO_LDFLAGS", "PKG_CONFIG"}

// goEnv is `go env` of names, as go sees them for the build env.
func goEnv(ctx context.Context, dir string, env, names []string) (map[string]string, error) {
	out, err := goCommand(ctx, dir, env, append([]string{"env", "-json"}, names...)...)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	if err := json.Unmarshal(out, &vars); err != nil {
		return nil, fmt.Errorf("reading go env's output: %w", err)
	}
	return vars, nil
}

func goCommand(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, indent(stderr.Bytes()))
	}
	return out, nil
}

// hashFile writes label and the SHA-256 of the file's contents into h.
func hashFile(h io.Writer, label, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fh := sha256.New()
	if _, err := io.Copy(fh, f); err != nil {
		return err
	}
	_, err = fmt.Fprintf(h, "%s %x\n", label, fh.Sum(nil))
	return err
}

// hashC writes what a cgo image takes from the build host into h: the C compiler (its resolved
// path, size and time: a compiler upgrade replaces it), the loader and the C libraries that
// RuntimeFiles copies (libc and extra, with what they need).
func hashC(h io.Writer, arch, cc string, extra []string) error {
	m, ok := machines[arch]
	if !ok {
		return fmt.Errorf("cgo images are built for amd64 and arm64 only, not %s", arch)
	}
	compiler := "none found"
	if fields := strings.Fields(cc); len(fields) > 0 {
		if p, err := exec.LookPath(fields[0]); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				if fi, err := os.Stat(real); err == nil {
					compiler = fmt.Sprintf("%s %d %d", real, fi.Size(), fi.ModTime().UnixNano())
				}
			}
		}
	}
	fmt.Fprintf(h, "cc %q %s\n", cc, compiler)
	if err := hashFile(h, "loader "+m.interp, m.interp); err != nil {
		return fmt.Errorf("the C loader: %w", err)
	}
	return libraries(arch, m.interp, append([]string{"libc.so.6"}, extra...), func(soname string, data []byte) {
		fmt.Fprintf(h, "library %s %x\n", soname, sha256.Sum256(data))
	})
}
