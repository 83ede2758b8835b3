package mxjob_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlkube/mlkube/internal/crdvalidate"
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

// crdAccepts is whether the apiserver would store a job, given what the CRD refuses in it
// (crdvalidate.ValidateAll: the CRD itself, its schema and CEL rules checked in process, replicas
// and port defaulted as the apiserver defaults them). ValidateAll finds more only where Validate,
// the apiserver's create, finds something already.
func crdAccepts(crd field.ErrorList) bool { return len(crd) == 0 }

// refuses says whether errs (crdvalidate.ValidateAll's) refuse field name of group i, of type
// typ: an error at the field, or at the group (a rule on it, whose message names the field), or
// its type used twice (the apiserver names the second group of a type only).
func refuses(errs field.ErrorList, i int, name, typ string) bool {
	at := fmt.Sprintf("spec.replicaSpecs[%d]", i)
	return slices.ContainsFunc(errs, func(e *field.Error) bool {
		return e.Field == at || e.Field == at+"."+name || e.Type == field.ErrorTypeDuplicate && reflect.DeepEqual(e.BadValue, map[string]any{"mxReplicaType": typ})
	})
}

// refusedAt says whether errs hold an error at the field at path itself.
func refusedAt(errs field.ErrorList, path string) bool {
	return slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == path })
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
		crd := crdvalidate.ValidateAll(job)
		for i, g := range job.Spec.ReplicaSpecs {
			if g.MXReplicaType == v1beta1.MXReplicaScheduler {
				schedulerPort = orDefault(g.Port, v1beta1.DefaultMXPort)
			}
			at := fmt.Sprintf("spec.replicaSpecs[%d]", i)
			// (A negative count runs one pod, as Replicas has it, and the env says one.)
			if g.Replicas > 0 && refusedAt(crd, at+".replicas") {
				t.Fatalf("%s: built with %d %s replicas, which the CRD refuses", what, g.Replicas, g.MXReplicaType)
			}
			if refusedAt(crd, at+".mxReplicaType") {
				t.Fatalf("%s: built with a %q group, which the CRD refuses: it is no ps-lite role", what, g.MXReplicaType)
			}
		}
		if pods[string(v1beta1.MXReplicaScheduler)] != 1 {
			t.Fatalf("%s: built with %d schedulers: ps-lite has one", what, pods[string(v1beta1.MXReplicaScheduler)])
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

// checkRefusal asserts that err names what is wrong, truly (each field it names is one the CRD
// refuses, every rule of it checked: crdvalidate.ValidateAll), and that the apiserver would
// have refused the job or the replica is not one of the job's.
func checkRefusal(t *testing.T, what string, job *v1beta1.MXJob, taskInside bool, err error) {
	t.Helper()
	groups := job.Spec.ReplicaSpecs
	crd := crdvalidate.ValidateAll(job)
	for _, line := range strings.Split(err.Error(), "\n") {
		switch m := groupFieldError.FindStringSubmatch(line); {
		case m != nil:
			i, _ := strconv.Atoi(m[1])
			if i >= len(groups) {
				t.Fatalf("%s: the error names group %d of %d: %q", what, i, len(groups), line)
			}
			if !refuses(crd, i, m[2], string(groups[i].MXReplicaType)) {
				t.Fatalf("%s: the error blames replicaSpecs[%d].%s, which the CRD takes: %q", what, i, m[2], line)
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
	if crdAccepts(crd) && taskInside {
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
