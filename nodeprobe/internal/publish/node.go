package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/accelerator"
)

// NodeSummary is the annotation's JSON value: enough to tell, with kubectl, which nodes have
// which driver where, and why a node has none.
type NodeSummary struct {
	GPU bool `json:"gpu"`
	// Reason says why there is no GPU, or why NVML did not answer.
	Reason            string   `json:"reason,omitempty"`
	DriverVersion     string   `json:"driverVersion,omitempty"`
	CUDADriverVersion string   `json:"cudaDriverVersion,omitempty"`
	GPUs              int      `json:"gpus"`
	Models            []string `json:"models,omitempty"`
	// Layout is the ID of this node's layout in the ConfigMap's layouts.yaml.
	Layout    string   `json:"layout,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	Binaries  []string `json:"binaries,omitempty"`
	// Warnings are the problems the probe met (broken driver files, an unreadable
	// ld.so.cache), each naming the host path.
	Warnings []string `json:"warnings,omitempty"`
	// Runtime says how the node's container runtime gives containers the driver itself (the
	// NVIDIA container toolkit), and which file says so; the operator then mounts nothing there.
	Runtime string `json:"runtime,omitempty"`
	// NotPublished says why this node's layout was not recorded in the ConfigMap.
	NotPublished string `json:"notPublished,omitempty"`
}

// Summarize turns a probe's outcome into the annotation's value.
func Summarize(r Report) NodeSummary {
	f := r.Finding
	if f == nil {
		return NodeSummary{GPU: false, Reason: r.NoGPUReason}
	}
	s := NodeSummary{
		GPU: true, Reason: f.NVMLError, DriverVersion: f.DriverVersion, CUDADriverVersion: f.CUDADriverVersion,
		GPUs: len(f.GPUs), Layout: LayoutID(f.Config), Warnings: f.Warnings,
	}
	if f.Runtime != nil {
		s.Runtime = fmt.Sprintf("%s (%s)", f.Runtime.How, f.Runtime.Path)
	}
	for _, g := range f.GPUs {
		if g.Name != "" && !slices.Contains(s.Models, g.Name) {
			s.Models = append(s.Models, g.Name)
		}
	}
	for _, l := range f.Libraries {
		s.Libraries = append(s.Libraries, l.Path)
	}
	for _, b := range f.Binaries {
		s.Binaries = append(s.Binaries, b.Path)
	}
	return s
}

// annotate writes the summary on the node when it differs from what is there, and labels the
// node with its layout's ID (accelerator.LayoutLabel; none without a GPU), which the published
// config's node selector names. It patches that annotation and that label and nothing else:
// other labels, taints and annotations belong to others, and a merge patch of just these keys
// cannot overwrite them, however stale our copy.
func (p *Publisher) annotate(ctx context.Context, node string, s NodeSummary) (bool, error) {
	value, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	var n corev1.Node
	if err := p.Client.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		return false, fmt.Errorf("reading node %s: %w", node, err)
	}
	label, labelled := n.Labels[accelerator.LayoutLabel]
	if n.Annotations[accelerator.NodeAnnotation] == string(value) && label == s.Layout && labelled == (s.Layout != "") {
		return false, nil
	}
	var layout any // null removes the label
	if s.Layout != "" {
		layout = s.Layout
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{accelerator.NodeAnnotation: string(value)},
		"labels":      map[string]any{accelerator.LayoutLabel: layout},
	}})
	if err != nil {
		return false, err
	}
	if err := p.Client.Patch(ctx, &n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return false, fmt.Errorf("annotating node %s: %w", node, err)
	}
	return true, nil
}
