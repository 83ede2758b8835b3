package kueue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Settings are what devctl chooses of Kueue's install.
type Settings struct {
	// Image is the manager's image, repository:tag. The nodes hold it and never pull it.
	Image string
	// PodsReadyTimeout is waitForPodsReady's timeout: how long an admitted job's pods have to
	// be ready before Kueue evicts the job and requeues it.
	PodsReadyTimeout time.Duration
	// Kinds are the kinds Kueue's config lists among its externalFrameworks: v1beta1.Kinds.
	Kinds []*v1beta1.Kind
}

// The requeuing of a job evicted for pods not ready in time: after 10 s, then twice as long each
// time, up to 5 min, without end (Kueue's default count). Kueue's own defaults (60 s, up to an
// hour) are for a production cluster, too slow to watch on a laptop.
const (
	requeueBaseSeconds = 10
	requeueMaxSeconds  = 300
)

// managerCPU is the manager's CPU request. The chart asks for 500m, a quarter of a 2-core
// machine that runs the whole cluster; Kueue idles at a few millicores.
const managerCPU = "100m"

// ExternalFramework is how Kueue's config names one of our kinds: Kind.version.group
// (TfJob.v1beta1.mlkube.io).
func ExternalFramework(k *v1beta1.Kind) string {
	return k.Name + "." + v1beta1.GroupVersion.Version + "." + v1beta1.GroupVersion.Group
}

// ManagerConfig is Kueue's controller_manager_config.yaml as devctl installs it: base, the
// chart's default, kept as it is (its integrations.frameworks, batch/job and the others, among
// it), with every kind of s.Kinds added to integrations.externalFrameworks and waitForPodsReady
// on, with s.PodsReadyTimeout and requeuing with backoff.
func ManagerConfig(base string, s Settings) (string, error) {
	if len(s.Kinds) == 0 {
		return "", errors.New("no kinds to list among Kueue's externalFrameworks")
	}
	if s.PodsReadyTimeout <= 0 {
		return "", fmt.Errorf("the pods-ready timeout must be more than 0, not %s", s.PodsReadyTimeout)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(base), &cfg); err != nil {
		return "", fmt.Errorf("the chart's manager config: %w", err)
	}
	if cfg == nil {
		return "", errors.New("the chart's manager config is empty")
	}
	integrations, ok := cfg["integrations"].(map[string]any)
	if !ok {
		if cfg["integrations"] != nil {
			return "", fmt.Errorf("the chart's manager config: integrations is a %T, not a map", cfg["integrations"])
		}
		integrations = map[string]any{}
		cfg["integrations"] = integrations
	}
	var external []any
	if have, ok := integrations["externalFrameworks"].([]any); ok {
		external = have
	}
	for _, k := range s.Kinds {
		if name := ExternalFramework(k); !slices.Contains(external, any(name)) {
			external = append(external, name)
		}
	}
	integrations["externalFrameworks"] = external
	cfg["waitForPodsReady"] = map[string]any{
		"timeout":        s.PodsReadyTimeout.String(),
		"blockAdmission": false,
		"requeuingStrategy": map[string]any{
			"timestamp":          "Eviction",
			"backoffBaseSeconds": requeueBaseSeconds,
			"backoffMaxSeconds":  requeueMaxSeconds,
		},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// Values are the chart values devctl renders Kueue's chart with, base being the chart's default
// manager config: the image the nodes hold (pull policy Never), the manager config of
// ManagerConfig, a smaller CPU request. Everything else is the chart's default, Kueue's own
// certificate management for its webhooks among it (no cert-manager).
func Values(base string, s Settings) (map[string]any, error) {
	i := strings.LastIndex(s.Image, ":")
	if i <= 0 || strings.Contains(s.Image[i:], "/") {
		return nil, fmt.Errorf("image %q has no tag", s.Image)
	}
	cfg, err := ManagerConfig(base, s)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"controllerManager": map[string]any{
			"manager": map[string]any{
				"image": map[string]any{
					"repository": s.Image[:i],
					"tag":        s.Image[i+1:],
					"pullPolicy": "Never",
				},
				"resources": map[string]any{
					"requests": map[string]any{"cpu": managerCPU},
				},
			},
		},
		"managerConfig": map[string]any{
			"controllerManagerConfigYaml": cfg,
		},
	}, nil
}
