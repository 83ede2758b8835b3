package kindcluster

import (
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// The multi-node config is one control plane and the workers asked for, kind's default CNI on
// (flannel, from the node image), and each node's /etc/cni/net.d a folder of its own.
func TestMultiNodeConfig(t *testing.T) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(MultiNodeConfig(2, "/cache/cni"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Networking.DisableDefaultCNI {
		t.Error("disableDefaultCNI is set: kind would not install flannel")
	}
	if len(c.Nodes) != 3 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole || c.Nodes[1].Role != v1alpha4.WorkerRole || c.Nodes[2].Role != v1alpha4.WorkerRole {
		t.Fatalf("nodes %+v, want a control plane and 2 workers", c.Nodes)
	}
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		if len(n.ExtraMounts) != 1 || n.ExtraMounts[0].ContainerPath != "/etc/cni/net.d" {
			t.Fatalf("node %d mounts %+v, want one folder over /etc/cni/net.d", i, n.ExtraMounts)
		}
		host := n.ExtraMounts[0].HostPath
		if filepath.Dir(host) != "/cache/cni" || seen[host] {
			t.Errorf("node %d: host folder %s, want one of its own under /cache/cni", i, host)
		}
		seen[host] = true
	}
}

// The node count of a config is what kind would make: one node when the config lists none.
func TestConfigNodes(t *testing.T) {
	for _, c := range []struct {
		config string
		want   int
	}{
		{DefaultConfig, 1},
		{string(MultiNodeConfig(2, "/cache/cni")), 3},
		{"kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n", 1},
	} {
		got, err := ConfigNodes([]byte(c.config))
		if err != nil || got != c.want {
			t.Errorf("ConfigNodes(%q) = %d, %v; want %d", c.config, got, err, c.want)
		}
	}
	if _, err := ConfigNodes([]byte("nodes: [")); err == nil {
		t.Error("ConfigNodes took a config that is not YAML")
	}
}

// UnpackPreloaded unpacks what every node runs, under its tag, and nothing of the control plane.
func TestEveryNodeRuns(t *testing.T) {
	runs := regexp.MustCompile(everyNodeRuns)
	for ref, want := range map[string]bool{
		"registry.k8s.io/pause:3.10.1":           true,
		"registry.k8s.io/kube-proxy:v1.34.4":     true,
		"docker.io/mlkube/flannel:v0.28.10":      true,
		"registry.k8s.io/kube-proxy@sha256:ab":   false, // the same image again, by digest
		"registry.k8s.io/kube-apiserver:v1.34.4": false,
		"registry.k8s.io/etcd:3.6.5-0":           false,
		"docker.io/mlkube/operator:dev":          false,
	} {
		if got := runs.MatchString(ref); got != want {
			t.Errorf("%s: unpacked %t, want %t", ref, got, want)
		}
	}
}

func TestPodNodes(t *testing.T) {
	role := func(n NodeContainer) string { return n.Role }
	names := func(ns []NodeContainer) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		all  []NodeContainer
		want []string
	}{
		{"one node", []NodeContainer{{Name: "cp", Role: "control-plane"}}, []string{"cp"}},
		{"workers: they alone, the control plane is tainted", []NodeContainer{{Name: "cp", Role: "control-plane"}, {Name: "w1", Role: "worker"}, {Name: "w2", Role: "worker"}}, []string{"w1", "w2"}},
		{"several control planes behind a load balancer", []NodeContainer{{Name: "lb", Role: "external-load-balancer"}, {Name: "cp1", Role: "control-plane"}, {Name: "cp2", Role: "control-plane"}}, []string{"cp1", "cp2"}},
	} {
		if got := names(podNodes(tc.all, role)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
