package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
)

// tree is one driver prefix of the node (see driverPrefixes): a root of its own for symlinks
// and the ld.so.cache, whose paths become host paths by adding prefix.
type tree struct {
	prefix string
	root   Root
	// cache holds the native-ABI entries of the tree's /etc/ld.so.cache; cacheErr says why
	// there are none when the file is there but unreadable.
	cache    []LDCacheEntry
	cacheErr error
	// problems are driver files and directories that are there but could not be used (see
	// check), in the order met.
	problems []string
}

func newTree(node Root, prefix string) *tree {
	t := &tree{prefix: prefix, root: Root(node.Join(prefix))}
	data, err := t.root.ReadFile("/etc/ld.so.cache")
	if errors.Is(err, fs.ErrNotExist) {
		return t // no cache (a GKE node's driver is not in it anyway)
	}
	if err != nil {
		// There but unreadable is not the same as absent: the search below may miss the
		// driver, and the finding must say why.
		t.cacheErr = errors.New(short(err))
		return t
	}
	entries, err := ParseLDCache(data)
	if err != nil {
		t.cacheErr = err
		return t
	}
	for _, e := range entries {
		if e.NativeABI() {
			t.cache = append(t.cache, e)
		}
	}
	return t
}

// warnings say what went wrong while reading the tree.
func (t *tree) warnings() []string {
	var out []string
	if t.cacheErr != nil {
		out = append(out, fmt.Sprintf("%s unreadable (%v); searched the usual directories only", t.host("/etc/ld.so.cache"), t.cacheErr))
	}
	return append(out, t.problems...)
}

// problem notes a driver file or directory that is there but unusable, once however many
// searches meet it.
func (t *tree) problem(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); !slices.Contains(t.problems, msg) {
		t.problems = append(t.problems, msg)
	}
}

// short says what is wrong in words that hold on any node: the path nodeprobe used (under
// /host, or a test's temp dir) is left out, messages name host paths themselves.
func short(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, syscall.ELOOP):
		return "symlink loop"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.As(err, &pe):
		return pe.Err.Error()
	}
	return err.Error()
}

// host turns a path inside the tree into a host path.
func (t *tree) host(p string) string { return path.Join(t.prefix, p) }

// found is a driver file: in the tree at dir/name; real is the file its links lead to.
type found struct {
	name, dir, real string
	by              string
}

// file is how a found file is reported and published: under its name (the SONAME link,
// libcuda.so.1, which survives driver updates) in its real directory, so that
// /lib/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu count as one where /lib is a link.
func (t *tree) file(f found) File {
	return File{Name: f.name, Path: t.host(t.published(f)), FoundBy: f.by}
}

// published is the path file reports, inside the tree. The kubelet follows a hostPath's links
// on the node itself, where absolute ones (Debian's packages link through /etc/alternatives)
// mean what they say. Inside a driver tree under a prefix they do not (its /usr/lib is not the
// node's), so there a link that leaves its directory is replaced by the file it leads to.
func (t *tree) published(f found) string {
	if t.prefix != "/" && path.Dir(f.real) != f.dir {
		return f.real
	}
	return path.Join(f.dir, f.name)
}

// inDir looks for library or binary name in one directory of the tree. For libraries (so=true)
// name is a base like "libcuda" and the SONAME is picked among the directory's files.
func (t *tree) inDir(dir, name string, so bool, version, by string) (found, bool) {
	file := name
	if so {
		names, err := t.root.ReadDir(dir)
		if err != nil {
			t.problem("cannot list %s: %s", t.host(dir), short(err))
		}
		var ok bool
		if file, ok = pickSOName(name, names, version); !ok {
			return found{}, false
		}
	}
	return t.check(path.Join(dir, file), by)
}

// check resolves a candidate. A name that is not there is simply not found. A name that is
// there but leads to no file nodeprobe can read (a dangling link, a loop, a directory, a file
// without read permission) is not found either, but noted: a broken or half-removed driver must
// say what is broken, and a finding with problems is degraded (Finding.Degraded).
func (t *tree) check(p, by string) (found, bool) {
	canon, err := t.root.Canonical(p)
	if err == nil {
		_, err = os.Lstat(t.root.Join(canon))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return found{}, false
	}
	if err != nil {
		t.problem("%s: %s; not used", t.host(p), short(err))
		return found{}, false
	}
	what := t.host(canon)
	if target, err := os.Readlink(t.root.Join(canon)); err == nil {
		what += " -> " + target
	}
	real, err := t.root.Resolve(canon)
	if errors.Is(err, fs.ErrNotExist) {
		t.problem("%s: dangling symlink; not used", what)
		return found{}, false
	}
	if err != nil {
		t.problem("%s: %s; not used", what, short(err))
		return found{}, false
	}
	if fi, err := os.Stat(t.root.Join(real)); err != nil || !fi.Mode().IsRegular() {
		why := "not a regular file"
		if err != nil {
			why = short(err)
		}
		t.problem("%s: %s; not used", what, why)
		return found{}, false
	}
	// The kubelet mounts it as root, but NVML (here) and most GPU containers read it as
	// another user: a file nodeprobe cannot read would be mounted and fail to load.
	fd, err := os.Open(t.root.Join(real))
	if err != nil {
		t.problem("%s: cannot read (%s); not used", what, short(err))
		return found{}, false
	}
	fd.Close()
	return found{name: path.Base(p), dir: path.Dir(canon), real: real, by: by}, true
}

// inCache looks a library up in the tree's ld.so.cache.
func (t *tree) inCache(base, version string) (found, bool) {
	var names []string
	paths := map[string]string{}
	for _, e := range t.cache {
		if _, seen := paths[e.Name]; !seen {
			names = append(names, e.Name)
			paths[e.Name] = e.Path
		}
	}
	name, ok := pickSOName(base, names, version)
	if !ok {
		return found{}, false
	}
	return t.check(paths[name], FoundInLDCache)
}

// library finds one driver library: (a) in nearDirs (where libnvidia-ml was), (b) in the
// ld.so.cache, (c) in the usual directories.
func (t *tree) library(base string, nearDirs []string, version string) (found, bool) {
	for _, d := range nearDirs {
		if f, ok := t.inDir(d, base, true, version, FoundNextToNVML); ok {
			return f, true
		}
	}
	if f, ok := t.inCache(base, version); ok {
		return f, true
	}
	for _, d := range libraryDirs(t.root) {
		if f, ok := t.inDir(d, base, true, version, FoundBySearch); ok {
			return f, true
		}
	}
	return found{}, false
}

// nvml finds libnvidia-ml in the tree: the ld.so.cache first (what the node's own programs
// would load), then the usual directories.
func (t *tree) nvml() (found, bool) {
	return t.library("libnvidia-ml", nil, "")
}

// binary finds one driver tool.
func (t *tree) binary(name string, dirs []string) (found, bool) {
	for _, d := range dirs {
		if f, ok := t.inDir(d, name, false, "", FoundBySearch); ok {
			return f, true
		}
	}
	return found{}, false
}

// looked lists where nvml() searched, as host paths, for the "no driver" message.
func (t *tree) looked() []string {
	out := []string{t.host("/etc/ld.so.cache")}
	for _, d := range libraryDirPatterns() {
		out = append(out, t.host(d))
	}
	return out
}
