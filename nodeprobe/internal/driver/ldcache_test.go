package driver

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// ldCacheFile writes an ld.so.cache from glibc's spec (see ldcache.go), so the parser is tested
// against the format rather than against itself.
type ldCacheFile struct{ entries []LDCacheEntry }

// strings lays out the string table: every name and path, NUL-terminated, and their offsets
// from the table's start.
func (c ldCacheFile) strings() ([]byte, []uint32, []uint32) {
	var table bytes.Buffer
	var keys, values []uint32
	for _, e := range c.entries {
		keys = append(keys, uint32(table.Len()))
		table.WriteString(e.Name + "\x00")
		values = append(values, uint32(table.Len()))
		table.WriteString(e.Path + "\x00")
	}
	return table.Bytes(), keys, values
}

// newFormat is a "glibc-ld.so.cache1.1" file (what glibc 2.32 and later write).
func (c ldCacheFile) newFormat() []byte {
	table, keys, values := c.strings()
	le := binary.LittleEndian
	var b bytes.Buffer
	b.WriteString(ldCacheNewMagic)
	b.Write(le.AppendUint32(nil, uint32(len(c.entries))))
	b.Write(le.AppendUint32(nil, uint32(len(table))))
	b.Write([]byte{ldCacheEndianLittle, 0, 0, 0})
	b.Write(make([]byte, 4+12)) // extension_offset, unused[3]
	start := uint32(ldCacheNewHeader + ldCacheNewEntry*len(c.entries))
	for i, e := range c.entries {
		b.Write(le.AppendUint32(nil, uint32(e.Flags)))
		b.Write(le.AppendUint32(nil, start+keys[i]))
		b.Write(le.AppendUint32(nil, start+values[i]))
		b.Write(le.AppendUint32(nil, 0)) // osversion
		b.Write(le.AppendUint64(nil, e.HWCap))
	}
	b.Write(table)
	return b.Bytes()
}

// oldFormat is an "ld.so-1.7.0" file; with compat, the new format follows it at the next
// 8-byte boundary and the old entries point into the new one's strings, as ldconfig before
// glibc 2.32 wrote by default.
func (c ldCacheFile) oldFormat(compat bool) []byte {
	le := binary.LittleEndian
	var b bytes.Buffer
	b.WriteString(ldCacheOldMagic)
	b.WriteByte(0)
	b.Write(le.AppendUint32(nil, uint32(len(c.entries))))
	end := ldCacheOldHeader + ldCacheOldEntry*len(c.entries)
	pad := int(align8(uint64(end))) - end
	table, keys, values := c.strings()
	base := uint32(0)
	if compat {
		base = uint32(pad + ldCacheNewHeader + ldCacheNewEntry*len(c.entries))
	}
	for i, e := range c.entries {
		b.Write(le.AppendUint32(nil, uint32(e.Flags)))
		b.Write(le.AppendUint32(nil, base+keys[i]))
		b.Write(le.AppendUint32(nil, base+values[i]))
	}
	if compat {
		b.Write(make([]byte, pad))
		b.Write(c.newFormat())
	} else {
		b.Write(table)
	}
	return b.Bytes()
}

const x8664 = LDFlagELFLibc6 | LDFlagX8664Lib64

var sampleCache = ldCacheFile{entries: []LDCacheEntry{
	{Name: "libnvidia-ml.so.1", Path: "/lib/x86_64-linux-gnu/libnvidia-ml.so.1", Flags: x8664},
	{Name: "libcuda.so.1", Path: "/lib/x86_64-linux-gnu/libcuda.so.1", Flags: x8664},
	{Name: "libcuda.so.1", Path: "/lib/i386-linux-gnu/libcuda.so.1", Flags: LDFlagELFLibc6},
	{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: x8664, HWCap: 0x4000000000000000},
}}

func TestParseLDCacheFormats(t *testing.T) {
	for name, data := range map[string][]byte{
		"new":        sampleCache.newFormat(),
		"old":        sampleCache.oldFormat(false),
		"old+new":    sampleCache.oldFormat(true),
		"no entries": ldCacheFile{}.newFormat(),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseLDCache(data)
			if err != nil {
				t.Fatal(err)
			}
			want := sampleCache.entries
			if name == "old" {
				// The old format has no hwcap field.
				want = append([]LDCacheEntry(nil), want...)
				want[3].HWCap = 0
			}
			if name == "no entries" {
				want = []LDCacheEntry{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseLDCacheBigEndian(t *testing.T) {
	data := ldCacheFile{entries: sampleCache.entries[:1]}.newFormat()
	// Rewrite the header and the one entry big-endian.
	be, le := binary.BigEndian, binary.LittleEndian
	data[28] = ldCacheEndianBig
	for _, off := range []int{20, 24, 48, 52, 56, 60} {
		be.PutUint32(data[off:], le.Uint32(data[off:]))
	}
	be.PutUint64(data[64:], le.Uint64(data[64:]))
	got, err := ParseLDCache(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != sampleCache.entries[0] {
		t.Errorf("got %+v", got)
	}
}

func TestNativeABIKeepsOnly64BitLibraries(t *testing.T) {
	got, err := ParseLDCache(sampleCache.newFormat())
	if err != nil {
		t.Fatal(err)
	}
	var native []string
	for _, e := range got {
		if e.NativeABI() {
			native = append(native, e.Path)
		}
	}
	if len(native) != 3 || strings.Contains(strings.Join(native, " "), "i386") {
		t.Errorf("native entries %q: the i386 libcuda must be left out", native)
	}
}

// Every cut of a good file is an error, never a panic or a partial list.
func TestParseLDCacheTruncated(t *testing.T) {
	for name, data := range map[string][]byte{
		"new":     sampleCache.newFormat(),
		"old":     sampleCache.oldFormat(false),
		"old+new": sampleCache.oldFormat(true),
	} {
		for n := 0; n < len(data); n++ {
			if got, err := ParseLDCache(data[:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes: no error, %d entries", name, n, len(data), len(got))
			}
		}
	}
}

func TestParseLDCacheGarbage(t *testing.T) {
	huge := sampleCache.newFormat()
	binary.LittleEndian.PutUint32(huge[20:], 0xffffffff)
	badOffset := sampleCache.newFormat()
	binary.LittleEndian.PutUint32(badOffset[52:], 0xfffffff0)
	unterminated := sampleCache.newFormat()
	unterminated = unterminated[:len(unterminated)-1]
	unterminated = append(unterminated, 'x')
	badEndian := sampleCache.newFormat()
	badEndian[28] = 1
	for name, data := range map[string][]byte{
		"empty":            nil,
		"text":             []byte("hello, this is not a cache"),
		"huge nlibs":       huge,
		"offset past end":  badOffset,
		"unterminated":     unterminated,
		"invalid endian":   badEndian,
		"old magic only":   []byte(ldCacheOldMagic),
		"old huge nlibs":   append([]byte(ldCacheOldMagic+"\x00"), 0xff, 0xff, 0xff, 0xff),
		"new magic only":   []byte(ldCacheNewMagic),
		"new header zeros": append([]byte(ldCacheNewMagic), make([]byte, 28)...)[:47],
	} {
		if _, err := ParseLDCache(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Random bytes behind each magic: any result but a panic.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		buf := make([]byte, rng.Intn(256))
		rng.Read(buf)
		for _, magic := range []string{ldCacheNewMagic, ldCacheOldMagic} {
			_, _ = ParseLDCache(append([]byte(magic), buf...))
		}
	}
}

// ldCacheError is how ParseLDCache's errors open: what of the cache is wrong.
var ldCacheError = regexp.MustCompile(`^(not an ld\.so\.cache|(old-format )?ld\.so\.cache( truncated)?: |entry \d+ (name|path): string )`)

// FuzzParseLDCache feeds ParseLDCache anything. It must not panic; an error must say what of
// the cache is wrong; entries must each have taken their 12 bytes or more of the input, and
// must be what the format can hold: written again by the spec's writer, they read back the same.
// Run it with: go test ./nodeprobe/internal/driver -run '^$' -fuzz '^FuzzParseLDCache$' -fuzztime 20s
func FuzzParseLDCache(f *testing.F) {
	f.Add(sampleCache.newFormat())
	f.Add(sampleCache.oldFormat(false))
	f.Add(sampleCache.oldFormat(true))
	f.Add(ldCacheFile{}.newFormat())
	f.Add([]byte(ldCacheOldMagic + "\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseLDCache(data)
		if err != nil {
			if !ldCacheError.MatchString(err.Error()) {
				t.Fatalf("the error for %q does not say what is wrong: %q", data, err)
			}
			return
		}
		if len(entries)*ldCacheOldEntry > len(data) {
			t.Fatalf("%d entries from %d bytes", len(entries), len(data))
		}
		again, err := ParseLDCache(ldCacheFile{entries: entries}.newFormat())
		if err != nil || !reflect.DeepEqual(again, entries) {
			t.Fatalf("entries %+v of %q, written again, read back as %+v, %v", entries, data, again, err)
		}
	})
}

// This machine's own cache, read by us and by glibc's ldconfig, must list the same libraries.
func TestParseLDCacheMatchesLdconfig(t *testing.T) {
	data, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skip("no /etc/ld.so.cache here:", err)
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		ldconfig = "/sbin/ldconfig"
	}
	out, err := exec.Command(ldconfig, "-p", "-C", "/etc/ld.so.cache").Output()
	if err != nil {
		t.Skip("cannot run ldconfig -p:", err)
	}
	entries, err := ParseLDCache(data)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, e := range entries {
		ours = append(ours, e.Name+" => "+e.Path)
	}
	var theirs []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " (")
		_, path, arrow := strings.Cut(rest, " => ")
		if !ok || !arrow {
			continue // the trailer: "Cache generated by: ldconfig (GNU libc) ..."
		}
		theirs = append(theirs, name+" => "+path)
	}
	if !reflect.DeepEqual(ours, theirs) {
		t.Errorf("parsed %d entries, ldconfig -p lists %d; first of ours %q, of theirs %q", len(ours), len(theirs), first(ours), first(theirs))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
