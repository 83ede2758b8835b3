package mxjob_test

import (
	"bytes"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
	"github.com/mlkube/mlkube/operator/mxjob"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// mxTypes are the replica types a fuzzed group picks from: the CRD's enum, then spellings the
// CRD refuses.
var mxTypes = []string{"SCHEDULER", "SERVER", "WORKER", "worker", "PS", ""}

// decodeGroups reads at most 6 groups (the CRD takes 3) from spec. Each runs the pod the CRD
// asks for (a container named mxnet, with an image), which the env does not depend on.
func decodeGroups(spec []byte) ([]v1beta1.MXReplicaSpec, string) {
	groups := jobtest.DecodeGroups(spec, mxTypes, 6)
	var out []v1beta1.MXReplicaSpec
	for _, g := range groups {
		out = append(out, v1beta1.MXReplicaSpec{MXReplicaType: v1beta1.MXReplicaType(g.Type), Replicas: g.Replicas, Port: g.Port, Template: template})
	}
	return out, jobtest.Describe(groups)
}

var template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: v1beta1.MXContainerName, Image: "mlkube/trainer:dev"}}}}

// FuzzEnv builds the DMLC_* env for fuzzed MXJobs: name, namespace, up to 6 replica groups of
// any type, replica count and port, and the replica asked for. Whatever it gets it must not
// panic. A job the CRD takes must resolve (replicajob.Resolve, the engine's check before it
// builds a pod), and what resolves gives each replica the five variables ps-lite reads, once
// each: its role, the scheduler at <job>-scheduler-0.<job>.<namespace>.svc and its port, and as many
// servers and workers as the job asks for.
// Run it with: go test ./operator/mxjob -run '^$' -fuzz '^FuzzEnv$' -fuzztime 20s
func FuzzEnv(f *testing.F) {
	join := func(groups ...[]byte) []byte { return bytes.Join(groups, nil) }
	standard := join(jobtest.FuzzGroup(0, 1, 9000), jobtest.FuzzGroup(1, 2, 0), jobtest.FuzzGroup(2, 3, 0))
	for _, seed := range []struct {
		name, ns  string
		spec      []byte
		taskGroup uint8
		taskIndex uint32
	}{
		{"mx", "ns", standard, 1, 1},
		{"mx", "ns", standard, 2, 2},
		{strings.Repeat("a", 48), strings.Repeat("n", 63), join(jobtest.FuzzGroup(2, jobtest.BigReplicas+500, 65535), jobtest.FuzzGroup(0, 0, 1)), 1, 0}, // 6000 workers
		{"mx", "ns", join(jobtest.FuzzGroup(2, 2, 0)), 0, 0},                             // no scheduler
		{"mx", "ns", join(jobtest.FuzzGroup(0, 2, 0), jobtest.FuzzGroup(2, 1, 0)), 0, 1}, // two schedulers
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, 70000), jobtest.FuzzGroup(2, 1, 0)), 1, 0},
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, -1), jobtest.FuzzGroup(2, 1, 0)), 1, 0},
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, 0), jobtest.FuzzGroup(2, -2, 0)), 1, 0}, // workers one past the CRD's maximum
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, 0), jobtest.FuzzGroup(2, -1, 0)), 1, 0}, // -1 workers
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, 0), jobtest.FuzzGroup(2, 2, 0), jobtest.FuzzGroup(2, 3, 0)), 1, 0},
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, 0), jobtest.FuzzGroup(2, 2, 0), jobtest.FuzzGroup(3, 3, 0)), 2, 0},
		{"mx", "ns", join(jobtest.FuzzGroup(0, 1, 0), jobtest.FuzzGroup(4, 1, 0), jobtest.FuzzGroup(5, 1, 0)), 1, 0},
		{"mx", "ns", nil, 0, 0},
		{"\n", "0", []byte("0"), 0, '<'},
	} {
		f.Add(seed.name, seed.ns, seed.spec, seed.taskGroup, seed.taskIndex)
	}

	f.Fuzz(func(t *testing.T, name, namespace string, spec []byte, taskGroup uint8, taskIndex uint32) {
		job := &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		specs, groups := decodeGroups(spec)
		job.Spec.ReplicaSpecs = specs
		fw := mxjob.Framework{}
		what := fmt.Sprintf("job %q/%q %s", namespace, name, groups)
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
				schedulerPort = orDefault(s.Port, fw.Kind().DefaultPort)
			}
		}
		want := map[string]string{
			"DMLC_ROLE":         strings.ToLower(g.Type),
			"DMLC_PS_ROOT_URI":  name + "-scheduler-0." + name + "." + namespace + ".svc",
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
