package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Root is the node's root file system as nodeprobe sees it: "/" when it runs on the node
// itself, "/host" in the DaemonSet, a temp dir in tests. Paths inside it are host paths, the
// ones the kubelet understands.
//
// Symlinks must be followed inside the root: a driver's libnvidia-ml.so.1 may point to
// /usr/lib/nvidia-550/libnvidia-ml.so.550.54.15, an absolute path that means the host's
// /usr/lib/nvidia-550, not the pod's. The OS would follow it out of /host into the pod's own
// file system, so Root resolves links itself.
type Root string

// maxLinks bounds symlink chains, as the kernel's ELOOP does (40 there).
const maxLinks = 40

// Join is where a host path is in nodeprobe's file system.
func (r Root) Join(hostPath string) string { return filepath.Join(string(r), hostPath) }

// Resolve follows every symlink in hostPath inside the root and returns the host path of what
// it names. ".." never climbs above the root. A missing file is an fs.ErrNotExist error.
func (r Root) Resolve(hostPath string) (string, error) {
	if !path.IsAbs(hostPath) {
		return "", fmt.Errorf("%q: not an absolute path", hostPath)
	}
	resolved := "/"
	rest := strings.Split(hostPath, "/")
	links := 0
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, part)
		fi, err := os.Lstat(r.Join(next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			// ELOOP, as the kernel says it, so that callers can tell a loop from other errors.
			return "", fmt.Errorf("%s: %w", hostPath, syscall.ELOOP)
		}
		target, err := os.Readlink(r.Join(next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}

// Canonical is hostPath with its directory resolved and its last element kept as it is. A
// library is published under its SONAME link (libcuda.so.1, which survives driver updates) in
// its real directory (/usr/lib/x86_64-linux-gnu, also reached as /lib/x86_64-linux-gnu where
// /lib is a link), so that two names of one directory count as one.
func (r Root) Canonical(hostPath string) (string, error) {
	dir, err := r.Resolve(path.Dir(hostPath))
	if err != nil {
		return "", err
	}
	return path.Join(dir, path.Base(hostPath)), nil
}

// IsFile says whether hostPath names a regular file, through links.
func (r Root) IsFile(hostPath string) bool {
	real, err := r.Resolve(hostPath)
	if err != nil {
		return false
	}
	fi, err := os.Stat(r.Join(real))
	return err == nil && fi.Mode().IsRegular()
}

// IsDir says whether hostPath names a directory, through links.
func (r Root) IsDir(hostPath string) bool {
	real, err := r.Resolve(hostPath)
	if err != nil {
		return false
	}
	fi, err := os.Stat(r.Join(real))
	return err == nil && fi.IsDir()
}

// ReadDir lists the names in a host directory; a missing one is empty.
func (r Root) ReadDir(hostPath string) ([]string, error) {
	real, err := r.Resolve(hostPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(r.Join(real))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

// ReadFile reads a host file, through links.
func (r Root) ReadFile(hostPath string) ([]byte, error) {
	real, err := r.Resolve(hostPath)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(r.Join(real))
}
