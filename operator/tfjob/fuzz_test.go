package tfjob_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
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

// decodeGroups reads at most 8 groups (the CRD takes 5) from spec. Each runs the pod the CRD
// asks for (a container named tensorflow, with an image), which TF_CONFIG does not depend on.
func decodeGroups(spec []byte) ([]v1beta1.TfReplicaSpec, string) {
	groups := jobtest.DecodeGroups(spec, fuzzTypes, 8)
	var out []v1beta1.TfReplicaSpec
	for _, g := range groups {
		out = append(out, v1beta1.TfReplicaSpec{TfReplicaType: v1beta1.TfReplicaType(g.Type), Replicas: g.Replicas, TfPort: g.Port, Template: template})
	}
	return out, jobtest.Describe(groups)
}

var template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: v1beta1.TfContainerName, Image: "mlkube/trainer:dev"}}}}

var sizeError = regexp.MustCompile(`^TF_CONFIG would be \d+ bytes, over the \d+ bytes Linux allows`)

// FuzzTFConfig checks fuzzed jobs as the engine does before it builds any pod
// (replicajob.Resolve), then builds the TF_CONFIG of one of their replicas: name, namespace, up
// to 8 replica groups of any type, replica count and port. Whatever it gets it must not panic.
// A job its CRD refuses must be refused, with every line the CRD says. A job the CRD takes must
// resolve, unless TF_CONFIG would be too long for an environment variable, which must be an
// error that says so. Whatever resolves gives JSON whose cluster lists exactly the replicas of
// the job, each at <job>-<type>-<index>.<job>.<namespace>.svc:<port>, and whose task is the replica
// asked for (an evaluator's outside the cluster, which leaves evaluators out).
// Run it with: go test ./operator/tfjob -run '^$' -fuzz '^FuzzTFConfig$' -fuzztime 20s
func FuzzTFConfig(f *testing.F) {
	join := func(groups ...[]byte) []byte { return bytes.Join(groups, nil) }
	big := func(n int16) int16 { return jobtest.BigReplicas + (n-2000)/8 } // n replicas: 2000, 2008 ... 6088
	standard := join(jobtest.FuzzGroup(0, 1, 0), jobtest.FuzzGroup(2, 2, 0), jobtest.FuzzGroup(3, 2, 0))
	for _, seed := range []struct {
		name, ns  string
		spec      []byte
		taskGroup uint8
		taskIndex uint32
	}{
		{"j", "ns", standard, 1, 1},
		{"j", "ns", standard, 255, 7},
		{"dist", "default", join(jobtest.FuzzGroup(1, 0, 0), jobtest.FuzzGroup(2, 3, 3333), jobtest.FuzzGroup(3, 0, 2223), jobtest.FuzzGroup(4, 1, 0)), 3, 0},
		// Regression: the CRD takes 10000 replicas a group, but past about 4700 in all (under
		// 1000 with the longest names) TF_CONFIG was built longer than Linux lets an
		// environment variable be.
		{strings.Repeat("a", 48), strings.Repeat("n", 63), join(jobtest.FuzzGroup(2, 100, 65535), jobtest.FuzzGroup(3, big(2000), 1)), 1, 99},
		{"j", "ns", join(jobtest.FuzzGroup(2, big(4000), 0)), 0, 3999},
		{"j", "ns", join(jobtest.FuzzGroup(2, big(5000), 0)), 0, 0},
		{"j", "ns", join(jobtest.FuzzGroup(2, -1, 2222)), 0, 0}, // -1
		{"j", "ns", join(jobtest.FuzzGroup(2, -2, 2222)), 0, 0}, // one past the CRD's maximum
		{"j", "ns", join(jobtest.FuzzGroup(2, -3, 2222)), 0, 0}, // MaxInt32
		{"j", "ns", join(jobtest.FuzzGroup(2, 1, 65536)), 0, 0},
		{"j", "ns", join(jobtest.FuzzGroup(2, 1, -1)), 0, 0},
		{"j", "ns", join(jobtest.FuzzGroup(2, 2, 0), jobtest.FuzzGroup(5, 2, 0)), 0, 0}, // WORKER and worker
		{"j", "ns", join(jobtest.FuzzGroup(2, 2, 0), jobtest.FuzzGroup(2, 1, 0)), 0, 0}, // WORKER twice
		{"j", "ns", join(jobtest.FuzzGroup(6, 1, 0), jobtest.FuzzGroup(7, 1, 0)), 0, 0},
		{"j", "ns", join(jobtest.FuzzGroup(0, 2, 0), jobtest.FuzzGroup(1, 1, 0)), 0, 1},
		{"j", "ns", nil, 0, 0},
		{"not.a-label", "ns", standard, 0, 0}, // the apiserver takes it; the CRD does not
		{"j\xff\"", "n s", standard, 0, 0},
	} {
		f.Add(seed.name, seed.ns, seed.spec, seed.taskGroup, seed.taskIndex)
	}

	f.Fuzz(func(t *testing.T, name, namespace string, spec []byte, taskGroup uint8, taskIndex uint32) {
		job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		specs, groups := decodeGroups(spec)
		job.Spec.ReplicaSpecs = specs
		fw := tfjob.Framework{}
		what := fmt.Sprintf("job %q/%q %s", name, namespace, groups)
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
				port = fw.Kind().DefaultPort
			}
			key := strings.ToLower(string(g.TfReplicaType))
			for i := 0; i < n; i++ {
				addr := name + "-" + key + "-" + strconv.Itoa(i) + "." + name + "." + namespace + ".svc:" + strconv.Itoa(int(port))
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
