package registry

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	"sigs.k8s.io/yaml"
)

// certsDir is where the nodes' containerd looks for a registry's hosts.toml, once told to.
const certsDir = "/etc/containerd/certs.d"

// containerdPatch tells containerd to read certsDir. kind writes it into every node's config
// when it creates the cluster; containerd reads the hosts.toml files there on each pull, so they
// can come after.
const containerdPatch = `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "` + certsDir + `"`

// KindConfig adds containerdPatch to a kind cluster config, unless one of its patches already
// sets config_path. Everything else in the config is kept as written.
func KindConfig(config []byte) ([]byte, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(config, &c); err != nil {
		return nil, fmt.Errorf("reading the kind config: %w", err)
	}
	for _, p := range c.ContainerdConfigPatches {
		if strings.Contains(p, "config_path") {
			return config, nil
		}
	}
	c.ContainerdConfigPatches = append(c.ContainerdConfigPatches, containerdPatch)
	return yaml.Marshal(&c)
}

// hostsTOML sends the nodes' pulls of localhost:5001 to the registry container, in plain HTTP.
const hostsTOML = `[host."http://` + InNetwork + `"]
  capabilities = ["pull", "resolve"]
`

// ErrNoConfigPath is Configure's error on a node whose containerd does not read certsDir.
var ErrNoConfigPath = errors.New("its containerd does not read " + certsDir)

// Configure writes the node's hosts.toml for localhost:5001. A node of a cluster made before
// devctl ran a registry has no config_path in its containerd config, and cannot pull from the
// registry until the cluster is made again: then the error is ErrNoConfigPath.
func Configure(n nodes.Node) error {
	script := `grep -q config_path /etc/containerd/config.toml || exit 3
mkdir -p "$1" && cat > "$1/hosts.toml"`
	cmd := n.Command("sh", "-c", script, "configure", certsDir+"/"+Host).SetStdin(strings.NewReader(hostsTOML))
	err := cmd.Run()
	var re *kindexec.RunError
	if errors.As(err, &re) && strings.Contains(re.Error(), "exit status 3") {
		return fmt.Errorf("node %s: %w", n, ErrNoConfigPath)
	}
	if err != nil {
		return fmt.Errorf("writing the registry's hosts.toml on node %s: %w", n, err)
	}
	return nil
}

// HostingConfigMap is KEP-1755's announcement of the registry, which tools that build images
// for the cluster read (Tilt, Skaffold, ctlptl).
func HostingConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "local-registry-hosting", Namespace: "kube-public"},
		Data: map[string]string{
			"localRegistryHosting.v1": "host: \"" + Host + "\"\nhostFromContainerRuntime: \"" + Host + "\"\nhelp: \"https://kind.sigs.k8s.io/docs/user/local-registry/\"\n",
		},
	}
}
