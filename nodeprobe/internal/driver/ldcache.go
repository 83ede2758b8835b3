package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
)

// The glibc dynamic linker's cache (/etc/ld.so.cache, written by ldconfig) maps each library's
// SONAME to the path ldconfig found it at. Reading it tells where a distribution put the driver
// without guessing directories. The layout is glibc's elf/dl-cache.h:
//
//	old format ("ld.so-1.7.0"), native endian:
//	  char magic[11]; (1 byte padding); uint32 nlibs;
//	  nlibs x {int32 flags; uint32 key; uint32 value}     12 bytes each
//	  string table; key and value are offsets from the start of the string table
//	new format ("glibc-ld.so.cache1.1"):
//	  char magic[17] "glibc-ld.so.cache"; char version[3] "1.1";
//	  uint32 nlibs; uint32 len_strings; uint8 flags (endianness); uint8 pad[3];
//	  uint32 extension_offset; uint32 unused[3];                    48 bytes
//	  nlibs x {int32 flags; uint32 key; uint32 value; uint32 osversion; uint64 hwcap}  24 bytes each
//	  string table; key and value are offsets from the start of this header
//
// glibc before 2.32 wrote both by default: an old-format cache followed, at the next 8-byte
// boundary, by a complete new-format one. glibc itself prefers the new part when it is there,
// and so do we.

const (
	ldCacheOldMagic = "ld.so-1.7.0"
	ldCacheNewMagic = "glibc-ld.so.cache1.1"

	ldCacheOldHeader = 16 // magic[11], padding to 12, nlibs
	ldCacheOldEntry  = 12
	ldCacheNewHeader = 48
	ldCacheNewEntry  = 24

	// The endianness values of the new header's flags byte.
	ldCacheEndianUnset  = 0
	ldCacheEndianLittle = 2
	ldCacheEndianBig    = 3
)

// Entry flags: the low byte says what kind of library it is, the next one for which ABI.
const (
	LDFlagTypeMask   = 0x00ff
	LDFlagELFLibc6   = 0x0003
	LDFlagArchMask   = 0xff00
	LDFlagX8664Lib64 = 0x0300
	LDFlagAArch64    = 0x0a00
)

// LDCacheEntry is one library of the cache.
type LDCacheEntry struct {
	// Name is the key ldconfig stored, the library's SONAME (libcuda.so.1).
	Name string
	// Path is where the library is, as ldconfig saw it (/lib/x86_64-linux-gnu/libcuda.so.1).
	Path  string
	Flags int32
	HWCap uint64
}

// NativeABI says whether the library is a glibc library for the ABI this program runs as. A
// 64-bit node also caches its 32-bit compatibility libraries (i386 libcuda.so.1, for example);
// those must not be mounted where a 64-bit program looks.
func (e LDCacheEntry) NativeABI() bool {
	if e.Flags&LDFlagTypeMask != LDFlagELFLibc6 {
		return false
	}
	want, ok := map[string]int32{"amd64": LDFlagX8664Lib64, "arm64": LDFlagAArch64}[runtime.GOARCH]
	return ok && e.Flags&LDFlagArchMask == want
}

// ParseLDCache reads an ld.so.cache. Whatever the input, it returns entries or an error; it
// never panics and never allocates more than the input's size suggests.
func ParseLDCache(data []byte) ([]LDCacheEntry, error) {
	switch {
	case bytes.HasPrefix(data, []byte(ldCacheNewMagic)):
		return parseNewLDCache(data)
	case bytes.HasPrefix(data, []byte(ldCacheOldMagic)):
		return parseOldLDCache(data)
	default:
		return nil, errors.New("not an ld.so.cache: unknown magic")
	}
}

func parseOldLDCache(data []byte) ([]LDCacheEntry, error) {
	if len(data) < ldCacheOldHeader {
		return nil, fmt.Errorf("old-format ld.so.cache truncated: %d bytes, header needs %d", len(data), ldCacheOldHeader)
	}
	// The old format has no endianness mark; every ABI we run on is little-endian.
	order := binary.ByteOrder(binary.LittleEndian)
	nlibs := uint64(order.Uint32(data[12:]))
	end := ldCacheOldHeader + nlibs*ldCacheOldEntry
	if end > uint64(len(data)) {
		return nil, fmt.Errorf("old-format ld.so.cache truncated: %d entries need %d bytes, file has %d", nlibs, end, len(data))
	}
	if next := align8(end); next < uint64(len(data)) && bytes.HasPrefix(data[next:], []byte(ldCacheNewMagic)) {
		return parseNewLDCache(data[next:])
	}
	strings := data[end:]
	out := make([]LDCacheEntry, 0, nlibs)
	for i := uint64(0); i < nlibs; i++ {
		e := data[ldCacheOldHeader+i*ldCacheOldEntry:]
		key, err := cString(strings, order.Uint32(e[4:]))
		if err != nil {
			return nil, fmt.Errorf("entry %d name: %w", i, err)
		}
		value, err := cString(strings, order.Uint32(e[8:]))
		if err != nil {
			return nil, fmt.Errorf("entry %d path: %w", i, err)
		}
		out = append(out, LDCacheEntry{Name: key, Path: value, Flags: int32(order.Uint32(e))})
	}
	return out, nil
}

func parseNewLDCache(data []byte) ([]LDCacheEntry, error) {
	if len(data) < ldCacheNewHeader {
		return nil, fmt.Errorf("ld.so.cache truncated: %d bytes, header needs %d", len(data), ldCacheNewHeader)
	}
	var order binary.ByteOrder
	switch data[28] & 3 {
	case ldCacheEndianUnset, ldCacheEndianLittle:
		// Unset: written by a glibc too old to mark it, which only ran little-endian here.
		order = binary.LittleEndian
	case ldCacheEndianBig:
		order = binary.BigEndian
	default:
		return nil, errors.New("ld.so.cache: invalid endianness flag")
	}
	nlibs := uint64(order.Uint32(data[20:]))
	end := ldCacheNewHeader + nlibs*ldCacheNewEntry
	if end > uint64(len(data)) {
		return nil, fmt.Errorf("ld.so.cache truncated: %d entries need %d bytes, file has %d", nlibs, end, len(data))
	}
	out := make([]LDCacheEntry, 0, nlibs)
	for i := uint64(0); i < nlibs; i++ {
		e := data[ldCacheNewHeader+i*ldCacheNewEntry:]
		// New-format offsets count from the header, not from the string table.
		key, err := cString(data, order.Uint32(e[4:]))
		if err != nil {
			return nil, fmt.Errorf("entry %d name: %w", i, err)
		}
		value, err := cString(data, order.Uint32(e[8:]))
		if err != nil {
			return nil, fmt.Errorf("entry %d path: %w", i, err)
		}
		out = append(out, LDCacheEntry{Name: key, Path: value, Flags: int32(order.Uint32(e)), HWCap: order.Uint64(e[16:])})
	}
	return out, nil
}

// cString is the NUL-terminated string at off in table.
func cString(table []byte, off uint32) (string, error) {
	if uint64(off) >= uint64(len(table)) {
		return "", fmt.Errorf("string offset %d beyond the %d-byte table", off, len(table))
	}
	n := bytes.IndexByte(table[off:], 0)
	if n < 0 {
		return "", fmt.Errorf("string at offset %d not terminated", off)
	}
	return string(table[off : int(off)+n]), nil
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }
