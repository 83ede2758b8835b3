package mxjob_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/mxjob"
)

// mxTypes are the replica types a fuzzed group picks from: the CRD's enum, then spellings the
// CRD refuses.
var mxTypes = []string{"SCHEDULER", "SERVER", "WORKER", "worker", "PS", ""}

// outOfRange are the replica counts a negative fuzzed count stands for.
var outOfRange = []int32{-1, 10001, math.MaxInt32, math.MinInt32}

// mxGroup encodes a replica group for the fuzzer's spec bytes: the type, replicas (negative:
// one of outOfRange) and port (signed 24 bits).
func mxGroup(typ int, replicas int16, port int32) []byte {
	b := binary.BigEndian.AppendUint16([]byte{byte(typ)}, uint16(replicas))
	return append(b, byte(port>>16), byte(port>>8), byte(port))
}

// decodeGroups reads at most 6 groups (the CRD takes 3) of 6 bytes from spec.
func decodeGroups(spec []byte) []v1beta1.MXReplicaSpec {
	var out []v1beta1.MXReplicaSpec
	for len(spec) >= 6 && len(out) < 6 {
		replicas := int32(int16(binary.BigEndian.Uint16(spec[1:])))
		if replicas < 0 {
			replicas = outOfRange[int(-(replicas+1))%len(outOfRange)]
		}
		port := (int32(spec[3])<<16 | int32(spec[4])<<8 | int32(spec[5])) << 8 >> 8
		out = append(out, v1beta1.MXReplicaSpec{
			MXReplicaType: v1beta1.MXReplicaType(mxTypes[int(spec[0])%len(mxTypes)]),
			Replicas:      replicas,
			Port:          port,
		})
		spec = spec[6:]
	}
	return out
}

var crdName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// crdAccepts is whether the apiserver would store the job, by the CRD's schema and CEL rules
// that bear on the env (operator/api/v1beta1/mxjob_types.go).
func crdAccepts(job *v1beta1.MXJob) bool {
	if len(job.Name) > 48 || !crdName.MatchString(job.Name) || len(validation.IsDNS1123Label(job.Namespace)) > 0 {
		return false
	}
	groups := job.Spec.ReplicaSpecs
	if len(groups) < 1 || len(groups) > 3 {
		return false
	}
	seen := map[v1beta1.MXReplicaType]bool{}
	for _, g := range groups {
		if !slices.Contains(mxTypes[:3], string(g.MXReplicaType)) || seen[g.MXReplicaType] {
			return false
		}
		seen[g.MXReplicaType] = true
		if g.Replicas < 0 || g.Replicas > 10000 || g.Port < 0 || g.Port > 65535 {
			return false
		}
		if g.MXReplicaType == v1beta1.MXReplicaScheduler && g.Replicas > 1 {
			return false
		}
	}
	return seen[v1beta1.MXReplicaScheduler]
}

var (
	groupFieldError  = regexp.MustCompile(`\breplicaSpecs\[(\d+)\]\.(mxReplicaType|replicas|port)\b`)
	noSchedulerError = regexp.MustCompile(`\breplicaSpecs\b.*\bno SCHEDULER group\b`)
	replicaError     = regexp.MustCompile(`\breplica ("(?:[^"\\]|\\.)*") (-?\d+): `)
)

// FuzzEnv builds the DMLC_* env for fuzzed MXJobs: name, namespace, up to 6 replica groups of
// any type, replica count and port, and the replica asked for (inside its group or just past
// either end). Whatever it gets it must not panic. A job the apiserver would store, asked for
// one of its replicas, must build; a refusal must name the field at fault, truly. Whatever
// builds is the five variables ps-lite reads, once each: the role asked for, the scheduler at
// <job>-scheduler-0.<namespace>.svc and its port (1-65535), and as many servers and workers
// as the engine runs pods of.
// Run it with: go test ./operator/mxjob -run '^$' -fuzz '^FuzzEnv$' -fuzztime 20s
func FuzzEnv(f *testing.F) {
	join := func(groups ...[]byte) []byte { return bytes.Join(groups, nil) }
	standard := join(mxGroup(0, 1, 9000), mxGroup(1, 2, 0), mxGroup(2, 3, 0))
	for _, seed := range []struct {
		name, ns  string
		spec      []byte
		taskGroup uint8
		taskIndex int32
	}{
		{"mx", "ns", standard, 1, 1},
		{"mx", "ns", standard, 2, -2}, // one past the last worker
		{"mx", "ns", standard, 0, -1},
		{"mx", "ns", standard, 255, 0},
		{strings.Repeat("a", 48), strings.Repeat("n", 63), join(mxGroup(2, 10000, 65535), mxGroup(0, 0, 1)), 1, 0},
		{"mx", "ns", join(mxGroup(2, 2, 0)), 0, 0},                   // no scheduler
		{"mx", "ns", join(mxGroup(0, 2, 0), mxGroup(2, 1, 0)), 0, 1}, // two schedulers
		{"mx", "ns", join(mxGroup(0, 1, 70000), mxGroup(2, 1, 0)), 1, 0},
		{"mx", "ns", join(mxGroup(0, 1, -1), mxGroup(2, 1, 0)), 1, 0},
		{"mx", "ns", join(mxGroup(0, 1, 0), mxGroup(2, -2, 0)), 1, 0}, // 10001 workers
		{"mx", "ns", join(mxGroup(0, 1, 0), mxGroup(2, -1, 0)), 1, 0}, // -1 workers
		{"mx", "ns", join(mxGroup(0, 1, 0), mxGroup(2, 2, 0), mxGroup(2, 3, 0)), 1, 0},
		{"mx", "ns", join(mxGroup(0, 1, 0), mxGroup(2, 2, 0), mxGroup(3, 3, 0)), 2, 0},
		{"mx", "ns", join(mxGroup(0, 1, 0), mxGroup(4, 1, 0), mxGroup(5, 1, 0)), 1, 0},
		{"mx", "ns", nil, 0, 0},
		// The error once quoted the job's name as it was, and a name that no object can have
		// (a newline in it) split the error across lines.
		{"\n", "0", []byte("0"), 0, '<'},
	} {
		f.Add(seed.name, seed.ns, seed.spec, seed.taskGroup, seed.taskIndex)
	}

	f.Fuzz(func(t *testing.T, name, namespace string, spec []byte, taskGroup uint8, taskIndex int32) {
		job := &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		job.Spec.ReplicaSpecs = decodeGroups(spec)
		fw := mxjob.Framework{}
		replicas := job.Groups()

		typ, index, taskInside := "ABSENT", 0, false
		if len(replicas) > 0 && taskGroup != 255 {
			r := replicas[int(taskGroup)%len(replicas)]
			typ = r.Type
			switch {
			case taskIndex >= 0:
				index = int(taskIndex) % int(r.Replicas)
				taskInside = true
			case taskIndex%2 != 0:
				index = -1
			default:
				index = int(r.Replicas)
			}
		}
		what := fmt.Sprintf("job %q/%q %s, task %s %d", namespace, name, describe(job.Spec.ReplicaSpecs), typ, index)

		env, err := fw.Env(job, replicas, typ, index)
		if err != nil {
			checkRefusal(t, what, job, taskInside, err)
			return
		}

		got := map[string]string{}
		for _, e := range env {
			if _, twice := got[e.Name]; twice {
				t.Fatalf("%s: %s set twice", what, e.Name)
			}
			got[e.Name] = e.Value
		}
		// The pods the engine runs: Replicas' counts, which are the spec's, defaulted, for
		// every job the apiserver stores.
		pods := map[string]int32{}
		for _, r := range replicas {
			if _, twice := pods[r.Type]; twice {
				t.Fatalf("%s: built for two %s groups: DMLC_NUM_* can count only one", what, r.Type)
			}
			pods[r.Type] = r.Replicas
		}
		var schedulerPort int32
		for _, g := range job.Spec.ReplicaSpecs {
			if g.MXReplicaType == v1beta1.MXReplicaScheduler {
				schedulerPort = orDefault(g.Port, v1beta1.DefaultMXPort)
			}
			// (A negative count runs one pod, as Replicas has it, and the env says one.)
			if g.Replicas > 10000 {
				t.Fatalf("%s: built with %d %s replicas; the CRD allows 10000", what, g.Replicas, g.MXReplicaType)
			}
		}
		if pods[string(v1beta1.MXReplicaScheduler)] != 1 {
			t.Fatalf("%s: built with %d schedulers: ps-lite has one", what, pods[string(v1beta1.MXReplicaScheduler)])
		}
		for role := range pods {
			if !slices.Contains(mxTypes[:3], role) {
				t.Fatalf("%s: built with a %q group, which is no ps-lite role", what, role)
			}
		}
		want := map[string]string{
			"DMLC_ROLE":         strings.ToLower(typ),
			"DMLC_PS_ROOT_URI":  name + "-scheduler-0." + namespace + ".svc",
			"DMLC_PS_ROOT_PORT": strconv.Itoa(int(schedulerPort)),
			"DMLC_NUM_SERVER":   strconv.Itoa(int(pods[string(v1beta1.MXReplicaServer)])),
			"DMLC_NUM_WORKER":   strconv.Itoa(int(pods[string(v1beta1.MXReplicaWorker)])),
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: env\n%v\nwant\n%v", what, got, want)
		}
		if schedulerPort < 1 || schedulerPort > 65535 {
			t.Fatalf("%s: DMLC_PS_ROOT_PORT %d is no port", what, schedulerPort)
		}
		if !taskInside {
			t.Fatalf("%s: built for a replica the job does not have", what)
		}
	})
}

// checkRefusal asserts that err names what is wrong, truly, and that the apiserver would have
// refused the job or the replica is not one of the job's.
func checkRefusal(t *testing.T, what string, job *v1beta1.MXJob, taskInside bool, err error) {
	t.Helper()
	groups := job.Spec.ReplicaSpecs
	for _, line := range strings.Split(err.Error(), "\n") {
		switch m := groupFieldError.FindStringSubmatch(line); {
		case m != nil:
			i, _ := strconv.Atoi(m[1])
			if i >= len(groups) {
				t.Fatalf("%s: the error names group %d of %d: %q", what, i, len(groups), line)
			}
			g, bad := groups[i], false
			switch m[2] {
			case "mxReplicaType":
				bad = !slices.Contains(mxTypes[:3], string(g.MXReplicaType))
				for _, other := range groups[:i] {
					bad = bad || other.MXReplicaType == g.MXReplicaType
				}
			case "replicas":
				bad = g.Replicas < 0 || g.Replicas > 10000 || (g.MXReplicaType == v1beta1.MXReplicaScheduler && g.Replicas > 1)
			case "port":
				bad = g.Port < 0 || g.Port > 65535
			}
			if !bad {
				t.Fatalf("%s: the error blames replicaSpecs[%d].%s, which is fine: %q", what, i, m[2], line)
			}
		case noSchedulerError.MatchString(line):
			for _, g := range groups {
				if g.MXReplicaType == v1beta1.MXReplicaScheduler {
					t.Fatalf("%s: the error says there is no SCHEDULER group: %q", what, line)
				}
			}
		case replicaError.MatchString(line):
			if taskInside {
				t.Fatalf("%s: the error blames the replica asked for, which is one of the job's: %q", what, line)
			}
		default:
			t.Fatalf("%s: the error line names no field: %q", what, line)
		}
	}
	if crdAccepts(job) && taskInside {
		t.Fatalf("%s: the apiserver would store the job, but: %v", what, err)
	}
}

// orDefault is v, or def when v is unset (0), as the apiserver defaults it.
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// describe is the part of the groups the fuzzer varies.
func describe(groups []v1beta1.MXReplicaSpec) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("{%q replicas %d port %d}", g.MXReplicaType, g.Replicas, g.Port))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
