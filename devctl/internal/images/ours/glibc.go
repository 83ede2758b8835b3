package ours

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A File is one file of an image's base layer, at Path (absolute) inside the image.
type File struct {
	Path string
	Mode int64
	Data []byte
}

// machines are the ELF machines of the architectures we build cgo images for, and Debian's
// multiarch directory name for each: the library directory glibc's loader searches by default;
// interp is the loader glibc's binaries name (PT_INTERP) there.
var machines = map[string]struct {
	machine   elf.Machine
	multiarch string
	interp    string
}{
	"amd64": {elf.EM_X86_64, "x86_64-linux-gnu", "/lib64/ld-linux-x86-64.so.2"},
	"arm64": {elf.EM_AARCH64, "aarch64-linux-gnu", "/lib/ld-linux-aarch64.so.1"},
}

// RuntimeFiles finds what a dynamically linked binary needs to start, on this (the build) host:
// its loader (the ELF's PT_INTERP, e.g. /lib64/ld-linux-x86-64.so.2) and every shared library
// in the closure of its DT_NEEDED entries, plus extra (sonames of libraries the program loads
// itself, with dlopen, and their own needs). Each file is read through its links, and placed in
// the image where the loader finds it without an ld.so.cache: the loader at its PT_INTERP path,
// the libraries in /lib/<multiarch>. The result is sorted by path.
//
// A binary whose C library is glibc can only run with the glibc it was built against (or a newer
// one), so the files come from the host that built it, never from elsewhere.
func RuntimeFiles(binary []byte, arch string, extra []string) ([]File, error) {
	m, ok := machines[arch]
	if !ok {
		return nil, fmt.Errorf("cgo images are built for amd64 and arm64 only, not %s", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return nil, fmt.Errorf("reading the binary as ELF: %w", err)
	}
	defer f.Close()
	if f.Machine != m.machine || f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("the binary is for %s (%s), not %s", f.Machine, f.Class, arch)
	}
	interp, err := interpreter(f)
	if err != nil {
		return nil, err
	}
	if interp == "" {
		return nil, errors.New("the binary is statically linked (no PT_INTERP): it needs no C library, build it without cgo")
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("reading the binary's DT_NEEDED: %w", err)
	}

	loader, _, err := readLibrary(interp, m.machine)
	if err != nil {
		return nil, fmt.Errorf("the binary's loader %s: %w", interp, err)
	}
	files := []File{{Path: interp, Mode: 0o755, Data: loader}}
	libDir := "/lib/" + m.multiarch
	err = libraries(arch, interp, append(append([]string(nil), needed...), extra...), func(soname string, data []byte) {
		files = append(files, File{Path: path.Join(libDir, soname), Mode: 0o644, Data: data})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// libraries finds each of sonames on this host and, in turn, the libraries each needs, and
// gives each once to found, with its contents. The loader, interp, is not among them: libc
// names it too, and it is where the binary says.
func libraries(arch, interp string, sonames []string, found func(soname string, data []byte)) error {
	m := machines[arch]
	seen := map[string]bool{path.Base(interp): true}
	queue := slices.Clone(sonames)
	for len(queue) > 0 {
		soname := queue[0]
		queue = queue[1:]
		if seen[soname] {
			continue
		}
		seen[soname] = true
		data, deps, err := findLibrary(soname, m.multiarch, m.machine)
		if err != nil {
			return err
		}
		found(soname, data)
		queue = append(queue, deps...)
	}
	return nil
}

func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("reading the binary's PT_INTERP: %w", err)
		}
		return strings.TrimRight(string(data), "\x00"), nil
	}
	return "", nil
}

// libraryDirs are where the build host's shared libraries are, in the order glibc's loader
// searches them on Debian and Ubuntu (multiarch), then on RHEL-like systems.
func libraryDirs(multiarch string) []string {
	return []string{"/lib/" + multiarch, "/usr/lib/" + multiarch, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
}

// findLibrary finds soname on the host, skipping files of another architecture (a 32-bit libc
// in /lib on a multilib system), and returns its contents and its own DT_NEEDED.
func findLibrary(soname, multiarch string, machine elf.Machine) ([]byte, []string, error) {
	if strings.Contains(soname, "/") {
		return nil, nil, fmt.Errorf("DT_NEEDED %q is a path, not a library name", soname)
	}
	var skipped []string
	for _, dir := range libraryDirs(multiarch) {
		data, deps, err := readLibrary(filepath.Join(dir, soname), machine)
		switch {
		case err == nil:
			return data, deps, nil
		case errors.Is(err, os.ErrNotExist):
			continue
		}
		skipped = append(skipped, err.Error())
	}
	msg := fmt.Sprintf("shared library %s not found in %s on this machine", soname, strings.Join(libraryDirs(multiarch), ", "))
	if len(skipped) > 0 {
		msg += " (skipped: " + strings.Join(skipped, "; ") + ")"
	}
	return nil, nil, errors.New(msg)
}

// readLibrary reads the file at p, through its links, and checks that it is a 64-bit ELF for
// machine; it returns the file and its DT_NEEDED.
func readLibrary(p string, machine elf.Machine) ([]byte, []string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return nil, nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: not an ELF file: %w", real, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Class != elf.ELFCLASS64 {
		return nil, nil, fmt.Errorf("%s is for %s (%s)", real, f.Machine, f.Class)
	}
	deps, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading DT_NEEDED: %w", real, err)
	}
	return data, deps, nil
}
