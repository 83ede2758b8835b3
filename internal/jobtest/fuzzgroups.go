package jobtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// The fuzzers of the frameworks' env read a job's replica groups from the fuzzer's bytes, the
// same way for every kind: GroupBytes a group, the type (an index into the kind's list), the
// replica count (FuzzReplicas) and the port (signed 24 bits: negative, unset, 1-65535 and beyond).

// GroupBytes is how many bytes of the fuzzed spec make one replica group.
const GroupBytes = 1 + 2 + 3

// OutOfRange are the replica counts a negative fuzzed count stands for: the CRD's bounds
// crossed, read from the CRDs (one below the least minimum of any kind, or -1 where that is 0,
// which the Go type reads as unset; one above the greatest maximum), and the extremes, which
// must be refused before anything is allocated for them.
var OutOfRange = sync.OnceValue(func() []int32 {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, k := range v1beta1.Kinds {
		klo, khi, err := crdvalidate.Bounds(k, "spec.replicaSpecs[*].replicas")
		if err != nil {
			panic(err) // the CRDs are built in (operator/config): one that does not load is a bug
		}
		lo, hi = min(lo, klo), max(hi, khi)
	}
	below := int32(lo - 1)
	if below == 0 {
		below = -1
	}
	return []int32{below, int32(hi + 1), math.MaxInt32, math.MinInt32}
})

// BigReplicas marks, in the fuzzer's int16, a count of thousands: one in 64 of the positive
// values, so that most execs take microseconds, not milliseconds.
const BigReplicas = 0x7e00

// FuzzReplicas maps the fuzzer's int16 to a replica count: negative values to the counts of
// OutOfRange, values from BigReplicas to 2000-6088 in steps of 8 (around the count past which
// TF_CONFIG no longer fits an environment variable: about 4700 with the shortest names),
// others to 0-127.
func FuzzReplicas(v int16) int32 {
	switch {
	case v < 0:
		out := OutOfRange()
		return out[int(-(v+1))%len(out)]
	case v >= BigReplicas:
		return 2000 + 8*int32(v-BigReplicas)
	default:
		return int32(v) % 128
	}
}

// FuzzGroup encodes a replica group for a seed of the fuzzer's spec bytes.
func FuzzGroup(typ int, replicas int16, port int32) []byte {
	b := binary.BigEndian.AppendUint16([]byte{byte(typ)}, uint16(replicas))
	return append(b, byte(port>>16), byte(port>>8), byte(port))
}

// DecodeGroups reads at most n groups from spec, their types picked from types. They have no
// template: each fuzzer gives them the one its CRD asks for.
func DecodeGroups(spec []byte, types []string, n int) []v1beta1.ReplicaGroup {
	var out []v1beta1.ReplicaGroup
	for len(spec) >= GroupBytes && len(out) < n {
		out = append(out, v1beta1.ReplicaGroup{
			Type:     types[int(spec[0])%len(types)],
			Replicas: FuzzReplicas(int16(binary.BigEndian.Uint16(spec[1:]))),
			Port:     (int32(spec[3])<<16 | int32(spec[4])<<8 | int32(spec[5])) << 8 >> 8, // sign-extended
		})
		spec = spec[GroupBytes:]
	}
	return out
}

// Describe is the part of the groups a fuzzer varies, for its messages.
func Describe(groups []v1beta1.ReplicaGroup) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("{%q replicas %d port %d}", g.Type, g.Replicas, g.Port))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
