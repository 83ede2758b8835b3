package mxjob_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/crdvalidate"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/mxjob"
	"github.com/mlkube/mlkube/operator/replicajob"
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

// decodeGroups reads at most 6 groups (the CRD takes 3) of 6 bytes from spec. Each runs the pod
// the CRD asks for (a container named mxnet, with an image), which the env does not depend on.
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
			Template:      template,
		})
		spec = spec[6:]
	}
	return out
}

var template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: v1beta1.MXContainerName, Image: "mlkube/trainer:dev"}}}}

// FuzzEnv builds the DMLC_* env for fuzzed MXJobs: name, namespace, up to 6 replica groups of
// any type, replica count and port, and the replica asked for. Whatever it gets it must not
// panic. A job the CRD takes must resolve (replicajob.Resolve, the engine's check before it
// builds a pod), and what resolves gives each replica the five variables ps-lite reads, once
// each: its role, the scheduler at <job>-scheduler-0.<namespace>.svc and its port, and as many
// servers and workers as the job asks for.
// Run it with: go test ./operator/mxjob -run '^$' -fuzz '^FuzzEnv$' -fuzztime 20s
func FuzzEnv(f *testing.F) {
	join := func(groups ...[]byte) []byte { return bytes.Join(groups, nil) }
	standard := join(mxGroup(0, 1, 9000), mxGroup(1, 2, 0), mxGroup(2, 3, 0))
	for _, seed := range []struct {
		name, ns  string
		spec      []byte
		taskGroup uint8
		taskIndex uint32
	}{
		{"mx", "ns", standard, 1, 1},
		{"mx", "ns", standard, 2, 2},
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
		{"\n", "0", []byte("0"), 0, '<'},
	} {
		f.Add(seed.name, seed.ns, seed.spec, seed.taskGroup, seed.taskIndex)
	}

	f.Fuzz(func(t *testing.T, name, namespace string, spec []byte, taskGroup uint8, taskIndex uint32) {
		job := &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		job.Spec.ReplicaSpecs = decodeGroups(spec)
		fw := mxjob.Framework{}
		what := fmt.Sprintf("job %q/%q %s", namespace, name, describe(job.Spec.ReplicaSpecs))
		cluster, err := replicajob.Resolve(fw, job)
		if err != nil {
			if len(crdvalidate.Validate(job)) == 0 {
				t.Fatalf("%s: the CRD takes it, but: %v", what, err)
			}
			return
		}

		g := cluster.Groups[int(taskGroup)%len(cluster.Groups)]
		index := int(taskIndex % uint32(g.Replicas))
		got := map[string]string{}
		for _, e := range fw.Env(cluster, g.Type, index) {
			if _, twice := got[e.Name]; twice {
				t.Fatalf("%s: %s set twice", what, e.Name)
			}
			got[e.Name] = e.Value
		}
		// What the job asks for, defaulted as the apiserver defaults it.
		asked := map[v1beta1.MXReplicaType]int32{}
		var schedulerPort int32
		for _, s := range job.Spec.ReplicaSpecs {
			asked[s.MXReplicaType] = orDefault(s.Replicas, 1)
			if s.MXReplicaType == v1beta1.MXReplicaScheduler {
				schedulerPort = orDefault(s.Port, v1beta1.DefaultMXPort)
			}
		}
		want := map[string]string{
			"DMLC_ROLE":         strings.ToLower(g.Type),
			"DMLC_PS_ROOT_URI":  name + "-scheduler-0." + namespace + ".svc",
			"DMLC_PS_ROOT_PORT": strconv.Itoa(int(schedulerPort)),
			"DMLC_NUM_SERVER":   strconv.Itoa(int(asked[v1beta1.MXReplicaServer])),
			"DMLC_NUM_WORKER":   strconv.Itoa(int(asked[v1beta1.MXReplicaWorker])),
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: env of %s %d\n%v\nwant\n%v", what, g.Type, index, got, want)
		}
	})
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
