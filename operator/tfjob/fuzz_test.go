package tfjob_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/crdvalidate"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// maxEnvString is the most bytes Linux lets one "NAME=value" string of a new process's
// environment be, NUL included (MAX_ARG_STRLEN, 32 pages of 4 KiB): execve fails with E2BIG
// beyond it, so a container given a longer TF_CONFIG cannot even start.
const maxEnvString = 32 * 4096

// fuzzTypes are the replica types a fuzzed group picks from: the CRD's enum, then spellings
// the CRD refuses.
var fuzzTypes = []string{"MASTER", "CHIEF", "WORKER", "PS", "EVALUATOR", "worker", "Bogus", ""}

// groupBytes is how many bytes of the fuzzed spec make one replica group: the type, replicas
// (see fuzzReplicas) and port (signed 24 bits: negative, unset, 1-65535 and beyond).
const groupBytes = 1 + 2 + 3

// outOfRange are the replica counts a negative fuzzed count stands for: the CRD's bounds
// crossed, and the extremes, which must be refused before anything is allocated for them.
var outOfRange = []int32{-1, 10001, math.MaxInt32, math.MinInt32}

// bigReplicas marks, in the fuzzer's int16, a count of thousands: one in 64 of the positive
// values, so that most execs take microseconds, not milliseconds (a big cluster's JSON is
// 100 KiB or more).
const bigReplicas = 0x7e00

// fuzzReplicas maps the fuzzer's int16 to a replica count: negative values to the counts of
// outOfRange, values from bigReplicas to 2000-6088 in steps of 8 (around the count past which
// TF_CONFIG no longer fits an environment variable: about 4700 with the shortest names), others
// to 0-127.
func fuzzReplicas(v int16) int32 {
	switch {
	case v < 0:
		return outOfRange[int(-(v+1))%len(outOfRange)]
	case v >= bigReplicas:
		return 2000 + 8*int32(v-bigReplicas)
	default:
		return int32(v) % 128
	}
}

// tfGroup encodes a replica group for the fuzzer's spec bytes.
func tfGroup(typ int, replicas int16, port int32) []byte {
	b := []byte{byte(typ)}
	b = binary.BigEndian.AppendUint16(b, uint16(replicas))
	return append(b, byte(port>>16), byte(port>>8), byte(port))
}

// decodeGroups reads at most 8 groups (the CRD takes 5) from spec. Each runs the pod the CRD
// asks for (a container named tensorflow, with an image), which TF_CONFIG does not depend on.
func decodeGroups(spec []byte) []v1beta1.TfReplicaSpec {
	var out []v1beta1.TfReplicaSpec
	for len(spec) >= groupBytes && len(out) < 8 {
		port := int32(spec[3])<<16 | int32(spec[4])<<8 | int32(spec[5])
		port = port << 8 >> 8 // sign-extend the 24 bits
		out = append(out, v1beta1.TfReplicaSpec{
			TfReplicaType: v1beta1.TfReplicaType(fuzzTypes[int(spec[0])%len(fuzzTypes)]),
			Replicas:      fuzzReplicas(int16(binary.BigEndian.Uint16(spec[1:]))),
			TfPort:        port,
			Template:      template,
		})
		spec = spec[groupBytes:]
	}
	return out
}

var template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: v1beta1.TfContainerName, Image: "mlkube/trainer:dev"}}}}

var sizeError = regexp.MustCompile(`^TF_CONFIG would be \d+ bytes, over the \d+ bytes Linux allows`)

// describe is the part of the groups the fuzzer varies.
func describe(groups []v1beta1.TfReplicaSpec) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("{%q replicas %d port %d}", g.TfReplicaType, g.Replicas, g.TfPort))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// FuzzTFConfig checks fuzzed jobs as the engine does before it builds any pod
// (replicajob.Resolve), then builds the TF_CONFIG of one of their replicas: name, namespace, up
// to 8 replica groups of any type, replica count and port. Whatever it gets it must not panic.
// A job its CRD refuses must be refused, with every line the CRD says. A job the CRD takes must
// resolve, unless TF_CONFIG would be too long for an environment variable, which must be an
// error that says so. Whatever resolves gives JSON whose cluster lists exactly the replicas of
// the job, each at <job>-<type>-<index>.<namespace>.svc:<port>, and whose task is the replica
// asked for (an evaluator's outside the cluster, which leaves evaluators out).
// Run it with: go test ./operator/tfjob -run '^$' -fuzz '^FuzzTFConfig$' -fuzztime 20s
func FuzzTFConfig(f *testing.F) {
	join := func(groups ...[]byte) []byte { return bytes.Join(groups, nil) }
	big := func(n int16) int16 { return bigReplicas + (n-2000)/8 } // n replicas: 2000, 2008 ... 6088
	standard := join(tfGroup(0, 1, 0), tfGroup(2, 2, 0), tfGroup(3, 2, 0))
	for _, seed := range []struct {
		name, ns  string
		spec      []byte
		taskGroup uint8
		taskIndex uint32
	}{
		{"j", "ns", standard, 1, 1},
		{"j", "ns", standard, 255, 7},
		{"dist", "default", join(tfGroup(1, 0, 0), tfGroup(2, 3, 3333), tfGroup(3, 0, 2223), tfGroup(4, 1, 0)), 3, 0},
		// Regression: the CRD takes 10000 replicas a group, but past about 4700 in all (under
		// 1000 with the longest names) TF_CONFIG was built longer than Linux lets an
		// environment variable be.
		{strings.Repeat("a", 48), strings.Repeat("n", 63), join(tfGroup(2, 100, 65535), tfGroup(3, big(2000), 1)), 1, 99},
		{"j", "ns", join(tfGroup(2, big(4000), 0)), 0, 3999},
		{"j", "ns", join(tfGroup(2, big(5000), 0)), 0, 0},
		{"j", "ns", join(tfGroup(2, -1, 2222)), 0, 0}, // -1
		{"j", "ns", join(tfGroup(2, -2, 2222)), 0, 0}, // 10001
		{"j", "ns", join(tfGroup(2, -3, 2222)), 0, 0}, // MaxInt32
		{"j", "ns", join(tfGroup(2, 1, 65536)), 0, 0},
		{"j", "ns", join(tfGroup(2, 1, -1)), 0, 0},
		{"j", "ns", join(tfGroup(2, 2, 0), tfGroup(5, 2, 0)), 0, 0}, // WORKER and worker
		{"j", "ns", join(tfGroup(2, 2, 0), tfGroup(2, 1, 0)), 0, 0}, // WORKER twice
		{"j", "ns", join(tfGroup(6, 1, 0), tfGroup(7, 1, 0)), 0, 0},
		{"j", "ns", join(tfGroup(0, 2, 0), tfGroup(1, 1, 0)), 0, 1},
		{"j", "ns", nil, 0, 0},
		{"not.a-label", "ns", standard, 0, 0}, // the apiserver takes it; the CRD does not
		{"j\xff\"", "n s", standard, 0, 0},
	} {
		f.Add(seed.name, seed.ns, seed.spec, seed.taskGroup, seed.taskIndex)
	}

	f.Fuzz(func(t *testing.T, name, namespace string, spec []byte, taskGroup uint8, taskIndex uint32) {
		job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		job.Spec.ReplicaSpecs = decodeGroups(spec)
		fw := tfjob.Framework{}
		what := fmt.Sprintf("job %q/%q %s", name, namespace, describe(job.Spec.ReplicaSpecs))
		cluster, err := replicajob.Resolve(fw, job)

		if crd := crdvalidate.Validate(job); len(crd) > 0 {
			if err == nil {
				t.Fatalf("%s: the CRD refuses it (%v), but it resolved", what, crd)
			}
			for _, e := range crd {
				if line := crdvalidate.Line(e); !strings.Contains(err.Error(), line) {
					t.Fatalf("%s: the error does not say %q: %v", what, line, err)
				}
			}
			return
		}

		// Expected: every replica of every group but the evaluators, as the apiserver would
		// name its service, in the order of the spec.
		want := map[string][]string{}
		wantSize := 0 // the cluster's length in JSON
		for _, g := range job.Spec.ReplicaSpecs {
			if g.TfReplicaType == v1beta1.TfReplicaEvaluator {
				continue
			}
			n, port := int(g.Replicas), g.TfPort
			if n == 0 {
				n = 1
			}
			if port == 0 {
				port = v1beta1.DefaultTfPort
			}
			key := strings.ToLower(string(g.TfReplicaType))
			for i := 0; i < n; i++ {
				addr := name + "-" + key + "-" + strconv.Itoa(i) + "." + namespace + ".svc:" + strconv.Itoa(int(port))
				want[key] = append(want[key], addr)
				wantSize += len(addr) + 3 // quotes and comma
			}
		}
		if err != nil {
			if !sizeError.MatchString(err.Error()) || wantSize < maxEnvString-1024 {
				t.Fatalf("%s: the CRD takes it, its cluster is about %d bytes, but: %v", what, wantSize, err)
			}
			return
		}

		g := cluster.Groups[int(taskGroup)%len(cluster.Groups)]
		index := int(taskIndex % uint32(g.Replicas))
		value := tfjob.TFConfig(cluster, g.Type, index)
		if env := fw.Env(cluster, g.Type, index); len(env) != 1 || env[0].Name != "TF_CONFIG" || env[0].Value != value {
			t.Fatalf("env %+v: want TF_CONFIG alone, %q", env, value)
		}
		if size := len("TF_CONFIG=") + len(value) + 1; size > maxEnvString {
			t.Fatalf("%s: TF_CONFIG is %d bytes with its name, over the %d Linux allows one environment string: the container could not start", what, size, maxEnvString)
		}
		var cfg tfjob.Config
		if err := json.Unmarshal([]byte(value), &cfg); err != nil {
			t.Fatalf("TF_CONFIG %q is not JSON: %v", value, err)
		}
		if !reflect.DeepEqual(cfg.Cluster, want) {
			t.Fatalf("%s: cluster\n%v\nwant\n%v", what, cfg.Cluster, want)
		}
		if cfg.Task.Type != strings.ToLower(g.Type) || cfg.Task.Index != index || cfg.Environment != "cloud" {
			t.Fatalf("%s: task or environment is not what was asked for (%s %d)", value, g.Type, index)
		}
		if g.Type == string(v1beta1.TfReplicaEvaluator) {
			if _, in := cfg.Cluster["evaluator"]; in {
				t.Fatalf("%s: evaluator %d: it must be outside the cluster", value, index)
			}
		} else if index >= len(cfg.Cluster[cfg.Task.Type]) {
			t.Fatalf("%s: task %s %d is not in the cluster", value, cfg.Task.Type, index)
		}
	})
}

// maxEnvString is the kernel's: a TF_CONFIG that fills it exactly starts a process, one byte
// more does not. FuzzTFConfig's size check is only as good as this number.
func TestMaxEnvStringIsTheKernels(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getpagesize() != 4096 {
		t.Skip("MAX_ARG_STRLEN is 32 pages of 4 KiB on Linux only")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip(err)
	}
	for _, extra := range []int{0, 1} {
		value := strings.Repeat("x", maxEnvString-len("TF_CONFIG=")-1+extra)
		// Not this test binary: its TestMain may start a control plane.
		cmd := exec.Command(truePath)
		cmd.Env = []string{"TF_CONFIG=" + value}
		err := cmd.Run()
		if (err == nil) != (extra == 0) {
			t.Errorf("TF_CONFIG of %d bytes: exec %v", len(value), err)
		}
	}
}
