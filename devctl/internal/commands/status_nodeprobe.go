package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/operator/accelerator"
)

// The lines of `devctl status` about nodeprobe and what it found (docs/nodeprobe.md).

// nodeprobeHealth is the DaemonSet's line of `devctl status`.
func nodeprobeHealth(ctx context.Context, kube client.Client) string {
	ds := &appsv1.DaemonSet{}
	err := kube.Get(ctx, client.ObjectKey{Namespace: cluster.NodeprobeNamespace, Name: cluster.NodeprobeDaemonSet}, ds)
	if apierrors.IsNotFound(err) {
		return "not installed (run `devctl up`)"
	}
	if err != nil {
		return "cannot tell: " + err.Error()
	}
	s := ds.Status
	health := "Ready"
	if s.ObservedGeneration < ds.Generation || s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberReady < s.DesiredNumberScheduled {
		health = "not ready"
	}
	version := ds.Annotations[cluster.VersionAnnotation]
	if version == "" {
		version = "unknown (not installed by devctl)"
	}
	image := ""
	if cs := ds.Spec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	return fmt.Sprintf("%s, %d/%d nodes ready, version %s, image %s", health, s.NumberReady, s.DesiredNumberScheduled, version, image)
}

// gpuSummary is the part of nodeprobe's node annotation status shows.
type gpuSummary struct {
	GPU           bool   `json:"gpu"`
	Reason        string `json:"reason"`
	DriverVersion string `json:"driverVersion"`
	GPUs          int    `json:"gpus"`
	Runtime       string `json:"runtime"`
}

// gpuHealth is the GPUs line of `devctl status`: what the accelerator config holds, and what
// the nodes' nodeprobes found.
func gpuHealth(ctx context.Context, kube client.Client, nodes []corev1.Node) string {
	var cm corev1.ConfigMap
	err := kube.Get(ctx, client.ObjectKey{Namespace: cluster.OperatorNamespace, Name: cluster.AcceleratorConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("no accelerator config (ConfigMap %s/%s missing; run `devctl up`)", cluster.OperatorNamespace, cluster.AcceleratorConfigMap)
	}
	if err != nil {
		return "cannot tell: " + err.Error()
	}
	return describeGPUs(cm.Data[cluster.AcceleratorKey], nodes)
}

// describeGPUs says what an accelerator config configures, and which nodes reported a GPU.
func describeGPUs(config string, nodes []corev1.Node) string {
	var gpuNodes []string
	probed := 0
	for _, n := range nodes {
		raw, ok := n.Annotations[accelerator.NodeAnnotation]
		if !ok {
			continue
		}
		probed++
		var s gpuSummary
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			gpuNodes = append(gpuNodes, n.Name+" (unreadable report)")
			continue
		}
		if !s.GPU {
			continue
		}
		about := "driver " + orUnknown(s.DriverVersion)
		if s.Reason != "" {
			about += ", NVML did not answer"
		} else {
			about += fmt.Sprintf(", %d GPU(s)", s.GPUs)
		}
		if s.Runtime != "" {
			about += ", driver given by the runtime: " + s.Runtime
		} else {
			about += ", driver mounted by mlkube"
		}
		gpuNodes = append(gpuNodes, fmt.Sprintf("%s (%s)", n.Name, about))
	}
	sort.Strings(gpuNodes)
	reported := ""
	if len(gpuNodes) > 0 {
		reported = "; GPU nodes: " + strings.Join(gpuNodes, ", ")
	}

	cfg, err := accelerator.Parse([]byte(config))
	if err != nil {
		return "accelerator config unreadable: " + err.Error() + reported
	}
	var resources []string
	for name, a := range cfg.Accelerators {
		if a.Runtime != "" {
			resources = append(resources, fmt.Sprintf("%s (nothing mounted: the nodes' runtime gives the driver)", name))
			continue
		}
		resources = append(resources, fmt.Sprintf("%s (%d mounts, %d env vars)", name, len(a.Volumes), len(a.EnvVars)))
	}
	sort.Strings(resources)
	switch {
	case len(resources) > 0:
		return "configured: " + strings.Join(resources, ", ") + reported
	case probed == 0:
		return "none configured; no node probed yet"
	case len(gpuNodes) == 0:
		return fmt.Sprintf("no GPU found on any node (%d of %d probed)", probed, len(nodes))
	}
	return "none configured" + reported
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
