package pytorchjob_test

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/pytorchjob"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// The env is a pure function of the cluster the engine resolved. (The engine's behaviour with
// PyTorchJobs: operator/replicajob's TestConformance; the CRD's rules: operator/config.)
func TestEnv(t *testing.T) {
	fw := pytorchjob.Framework{}
	groups := []replicajob.Replica{{Type: "MASTER", Replicas: 1, Port: 29500}, {Type: "WORKER", Replicas: 3, Port: 23456}}
	cluster := replicajob.ClusterOf("ns", "pt", groups...)
	for _, tc := range []struct {
		typ   string
		index int
		want  string
	}{
		{"MASTER", 0, "MASTER_ADDR=pt-master-0.pt.ns.svc MASTER_PORT=29500 WORLD_SIZE=4 RANK=0"},
		{"WORKER", 2, "MASTER_ADDR=pt-master-0.pt.ns.svc MASTER_PORT=29500 WORLD_SIZE=4 RANK=3"},
	} {
		vars := fw.Env(cluster, tc.typ, tc.index)
		plain, pet := vars[:4], vars[4:8]
		var got []string
		for i, v := range plain {
			got = append(got, v.Name+"="+v.Value)
			// torchrun's twin of each, with the same value
			if !strings.HasPrefix(pet[i].Name, "PET_") || pet[i].Value != v.Value {
				t.Errorf("%s %d: %s=%s is not the twin of %s=%s", tc.typ, tc.index, pet[i].Name, pet[i].Value, v.Name, v.Value)
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s %d: env\n got %s\nwant %s", tc.typ, tc.index, strings.Join(got, " "), tc.want)
		}
		if last := vars[len(vars)-1]; len(vars) != 9 || last.Name != "PET_NPROC_PER_NODE" || last.Value != "1" {
			t.Errorf("%s %d: %d vars, last %+v", tc.typ, tc.index, len(vars), last)
		}
	}
}
