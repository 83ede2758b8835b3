package registry

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
)

// Every config devctl makes a cluster from gets the patch once, and keeps all it said.
func TestKindConfigAddsThePatchAndKeepsTheRest(t *testing.T) {
	configs := map[string][]byte{
		"default":   []byte(kindcluster.DefaultConfig),
		"--workers": kindcluster.MultiNodeConfig(2, "/tmp/net"),
	}
	for _, f := range []string{"kind.yaml", "kind-gpu.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "clusters", f))
		if err != nil {
			t.Fatal(err)
		}
		configs[f] = data
	}
	for name, in := range configs {
		out, err := KindConfig(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var before, after v1alpha4.Cluster
		if err := yaml.UnmarshalStrict(in, &before); err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(out, &after); err != nil {
			t.Fatalf("%s: the patched config does not read back: %v\n%s", name, err, out)
		}
		if n := len(after.ContainerdConfigPatches); n != len(before.ContainerdConfigPatches)+1 || after.ContainerdConfigPatches[n-1] != containerdPatch {
			t.Errorf("%s: patches %q, want the config's and ours", name, after.ContainerdConfigPatches)
		}
		after.ContainerdConfigPatches = before.ContainerdConfigPatches
		if !reflect.DeepEqual(before, after) {
			t.Errorf("%s: the config changed beyond the patch:\n%s\nbecame\n%s", name, in, out)
		}
		again, err := KindConfig(out)
		if err != nil || string(again) != string(out) {
			t.Errorf("%s: patched twice: %v\n%s", name, err, again)
		}
	}
}

// A config that sets config_path itself is the user's to keep, and a config kind would refuse is
// an error here, before any cluster is made.
func TestKindConfigLeavesAConfigPathAlone(t *testing.T) {
	own := `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/my-certs"
`
	out, err := KindConfig([]byte(own))
	if err != nil || string(out) != own {
		t.Errorf("a config with its own config_path: %v\n%s", err, out)
	}
	if _, err := KindConfig([]byte("kind: Cluster\nnodez: []\n")); err == nil || !strings.Contains(err.Error(), "nodez") {
		t.Errorf("a misspelt field: %v", err)
	}
}

// The ConfigMap says what KEP-1755 asks, in the form its readers parse.
func TestHostingConfigMap(t *testing.T) {
	cm := HostingConfigMap()
	if cm.Namespace != "kube-public" || cm.Name != "local-registry-hosting" {
		t.Fatalf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	}
	var v1 struct {
		Host                     string `json:"host"`
		HostFromContainerRuntime string `json:"hostFromContainerRuntime"`
		Help                     string `json:"help"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["localRegistryHosting.v1"]), &v1); err != nil {
		t.Fatal(err)
	}
	if v1.Host != "localhost:5001" || v1.HostFromContainerRuntime != "localhost:5001" || v1.Help == "" {
		t.Errorf("localRegistryHosting.v1 = %+v", v1)
	}
}
