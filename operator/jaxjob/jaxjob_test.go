package jaxjob_test

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/jaxjob"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// The env is a pure function of the cluster the engine resolved, named as Kubeflow's JAXJob
// names it. (The engine's behaviour with JAXJobs: operator/replicajob's TestConformance; the
// CRD's rules: operator/config.)
func TestEnv(t *testing.T) {
	fw := jaxjob.Framework{}
	groups := []replicajob.Replica{{Type: "WORKER", Replicas: 4, Port: 6666}}
	cluster := replicajob.ClusterOf("ns", "jx", groups...)
	for _, tc := range []struct {
		index int
		want  string
	}{
		{0, "COORDINATOR_ADDRESS=jx-worker-0.jx.ns.svc COORDINATOR_PORT=6666 NUM_PROCESSES=4 PROCESS_ID=0 PYTHONUNBUFFERED=1"},
		{3, "COORDINATOR_ADDRESS=jx-worker-0.jx.ns.svc COORDINATOR_PORT=6666 NUM_PROCESSES=4 PROCESS_ID=3 PYTHONUNBUFFERED=1"},
	} {
		var got []string
		for _, v := range fw.Env(cluster, "WORKER", tc.index) {
			got = append(got, v.Name+"="+v.Value)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("worker %d: env\n got %s\nwant %s", tc.index, strings.Join(got, " "), tc.want)
		}
	}
	// The coordinator's port is the group's, whatever it is.
	one := replicajob.ClusterOf("ns", "jx", replicajob.Replica{Type: "WORKER", Replicas: 1, Port: 1234})
	if env := fw.Env(one, "WORKER", 0); env[1].Value != "1234" || env[2].Value != "1" {
		t.Errorf("one worker on port 1234: %+v", env)
	}
}
