package main

import (
	"strings"
	"testing"
)

const (
	masterCluster = `"cluster":{"master":["j-master-0.ns.svc:2222"],"ps":["j-ps-0.ns.svc:2222","j-ps-1.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222","j-worker-1.ns.svc:2222"]}`
	chiefCluster  = `"cluster":{"chief":["j-chief-0.ns.svc:2222"],"ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]}`
	workerCluster = `"cluster":{"ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222","j-worker-1.ns.svc:2222"]}`
	noPSCluster   = `"cluster":{"master":["j-master-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]}`
)

func tfc(cluster, typ string, index int) string {
	return `{` + cluster + `,"task":{"type":"` + typ + `","index":` + string(rune('0'+index)) + `},"environment":"cloud"}`
}

func TestTFConfigRoles(t *testing.T) {
	for _, tc := range []struct {
		raw      string
		name     string
		role     string
		decider  bool
		self     string
		paramsOn string
	}{
		{tfc(masterCluster, "master", 0), "master-0", "decider", true, "j-master-0.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222 ps-1=j-ps-1.ns.svc:2222"},
		{tfc(masterCluster, "worker", 1), "worker-1", "worker", false, "j-worker-1.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222 ps-1=j-ps-1.ns.svc:2222"},
		{tfc(masterCluster, "worker", 0), "worker-0", "worker", false, "j-worker-0.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222 ps-1=j-ps-1.ns.svc:2222"},
		{tfc(masterCluster, "ps", 1), "ps-1", "parameter-server", false, "j-ps-1.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222 ps-1=j-ps-1.ns.svc:2222"},
		{tfc(masterCluster, "evaluator", 0), "evaluator-0", "evaluator", false, "", "ps-0=j-ps-0.ns.svc:2222 ps-1=j-ps-1.ns.svc:2222"},
		{tfc(chiefCluster, "chief", 0), "chief-0", "decider", true, "j-chief-0.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222"},
		{tfc(chiefCluster, "worker", 0), "worker-0", "worker", false, "j-worker-0.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222"},
		{tfc(workerCluster, "worker", 0), "worker-0", "decider", true, "j-worker-0.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222"},
		{tfc(workerCluster, "worker", 1), "worker-1", "worker", false, "j-worker-1.ns.svc:2222", "ps-0=j-ps-0.ns.svc:2222"},
		{tfc(noPSCluster, "master", 0), "master-0", "decider+parameter-server", true, "j-master-0.ns.svc:2222", "master-0=j-master-0.ns.svc:2222"},
		{tfc(noPSCluster, "worker", 0), "worker-0", "worker", false, "j-worker-0.ns.svc:2222", "master-0=j-master-0.ns.svc:2222"},
		// The operator's upper-case type names are accepted too.
		{`{"cluster":{"MASTER":["m:1"],"PS":["p:1"]},"task":{"type":"MASTER","index":0}}`, "master-0", "decider", true, "m:1", "ps-0=p:1"},
	} {
		t.Run(tc.name+"/"+tc.role, func(t *testing.T) {
			c, err := parseTFConfig(tc.raw, "TF_CONFIG")
			if err != nil {
				t.Fatal(err)
			}
			var on []string
			for _, p := range c.ParamServers() {
				on = append(on, p.name+"="+p.addr)
			}
			if c.Name() != tc.name || c.role() != tc.role || c.IsDecider() != tc.decider || c.Self() != tc.self || strings.Join(on, " ") != tc.paramsOn {
				t.Errorf("name %s role %s decider %v self %q params on %q; want %s %s %v %q %q",
					c.Name(), c.role(), c.IsDecider(), c.Self(), strings.Join(on, " "), tc.name, tc.role, tc.decider, tc.self, tc.paramsOn)
			}
		})
	}
}

func TestTFConfigErrors(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"cluster":`, "not valid JSON"},
		{`{"cluster":{"worker":["w:1"]},"task":{"index":0}}`, "task.type is missing"},
		{`{"cluster":{"worker":["w:1"]},"task":{"type":"boss","index":0}}`, `task.type "boss"`},
		{`{"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":1}}`, "task worker-1 is not in the cluster"},
		{`{"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":-1}}`, "negative"},
		{`{"cluster":{"master":["m:1"],"chief":["c:1"]},"task":{"type":"master","index":0}}`, "both a master and a chief"},
		{`{"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":0}}`, "no master, chief or worker"},
		{`{"cluster":{"worker":["w"]},"task":{"type":"worker","index":0}}`, `cluster.worker[0] = "w" is not host:port`},
	} {
		if _, err := parseTFConfig(tc.raw, "TF_CONFIG"); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "TF_CONFIG") {
			t.Errorf("parseTFConfig(%s) = %v, want an error with %q", tc.raw, err, tc.want)
		}
	}
}

func TestLoadTFConfig(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "TF_CONFIG" {
				return v
			}
			return ""
		}
	}
	_, err := loadTFConfig("", env(""))
	if err == nil || !strings.Contains(err.Error(), "TF_CONFIG is not set") || !strings.Contains(err.Error(), "--tf-config") {
		t.Fatalf("no TF_CONFIG: %v", err)
	}
	c, err := loadTFConfig("", env(tfc(workerCluster, "worker", 1)))
	if err != nil || c.Name() != "worker-1" {
		t.Fatalf("from the environment: %v %v", c.Name(), err)
	}
	c, err = loadTFConfig(tfc(workerCluster, "ps", 0), env(tfc(workerCluster, "worker", 1)))
	if err != nil || c.Name() != "ps-0" {
		t.Fatalf("--tf-config overrides: %v %v", c.Name(), err)
	}
	if _, err := loadTFConfig("{", env("")); err == nil || !strings.HasPrefix(err.Error(), "--tf-config is not valid JSON") {
		t.Fatalf("bad --tf-config: %v", err)
	}
}
