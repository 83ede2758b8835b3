package mxjob_test

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/mxjob"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// The env is a pure function of the cluster the engine resolved. (The engine's behaviour with
// MXJobs: operator/replicajob's TestConformance; the CRD's rules: operator/config.)
func TestEnv(t *testing.T) {
	fw := mxjob.Framework{}
	groups := []replicajob.Replica{{Type: "SCHEDULER", Replicas: 1, Port: 9000}, {Type: "SERVER", Replicas: 2, Port: 9091}, {Type: "WORKER", Replicas: 3, Port: 9091}}
	cluster := replicajob.ClusterOf("ns", "mx", groups...)
	for _, tc := range []struct {
		typ   string
		index int
		want  string
	}{
		{"SERVER", 1, "DMLC_ROLE=server DMLC_PS_ROOT_URI=mx-scheduler-0.mx.ns.svc DMLC_PS_ROOT_PORT=9000 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=3"},
		{"SCHEDULER", 0, "DMLC_ROLE=scheduler DMLC_PS_ROOT_URI=mx-scheduler-0.mx.ns.svc DMLC_PS_ROOT_PORT=9000 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=3"},
	} {
		var got []string
		for _, v := range fw.Env(cluster, tc.typ, tc.index) {
			got = append(got, v.Name+"="+v.Value)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s %d: env\n got %s\nwant %s", tc.typ, tc.index, strings.Join(got, " "), tc.want)
		}
	}
	// Without servers (a job of a scheduler and workers only) there are none to wait for.
	noServers := replicajob.ClusterOf("ns", "mx", groups[0], groups[2])
	if env := fw.Env(noServers, "WORKER", 0); env[3].Name != "DMLC_NUM_SERVER" || env[3].Value != "0" {
		t.Errorf("no servers: %+v", env)
	}
}
