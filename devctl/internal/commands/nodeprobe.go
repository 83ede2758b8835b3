package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	nodeprobeconfig "github.com/mlkube/mlkube/nodeprobe/config"
	"github.com/mlkube/mlkube/operator/accelerator"
)

// What devctl installs of nodeprobe, and what nodeprobe writes (docs/nodeprobe.md).
const (
	nodeprobeNamespace = "mlkube-nodeprobe"
	nodeprobeDaemonSet = "nodeprobe"
	// nodeprobeDevImage is the image nodeprobe's manifests name; devctl swaps in the one it built.
	nodeprobeDevImage = "mlkube/nodeprobe:dev"
	// acceleratorConfigMap in the operator's namespace holds the accelerator config, under
	// acceleratorKey; the operator's manifests create it, nodeprobe fills it.
	acceleratorConfigMap = "mlkube-accelerators"
	acceleratorKey       = "accelerators.yaml"
	// gpuDriverAnnotation is where each node's nodeprobe says what it found, as JSON.
	gpuDriverAnnotation = "mlkube.io/gpu-driver"
)

// nodeprobeObjects are nodeprobe's manifests (namespace, RBAC, DaemonSet) as devctl applies
// them: with the image it built, and its version on the DaemonSet.
func nodeprobeObjects(image, version string) ([]*unstructured.Unstructured, error) {
	objs, err := manifests.Read(nodeprobeconfig.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("reading the nodeprobe manifests: %w", err)
	}
	if err := manifests.SetImage(objs, nodeprobeDevImage, image); err != nil {
		return nil, fmt.Errorf("nodeprobe manifests: %w", err)
	}
	ds := manifests.Find(objs, "DaemonSet", nodeprobeNamespace, nodeprobeDaemonSet)
	if ds == nil {
		return nil, fmt.Errorf("the nodeprobe manifests have no DaemonSet %s/%s", nodeprobeNamespace, nodeprobeDaemonSet)
	}
	annotations := ds.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[versionAnnotation] = version
	ds.SetAnnotations(annotations)
	return objs, nil
}

// withoutLiveAcceleratorConfig drops the accelerator ConfigMap from the operator's objects when
// it exists already. The manifests ship it empty, for a first install; after that it is
// nodeprobe's (and whoever edits it by hand): applying it again would take its data back and
// empty the published config until nodeprobe's next probe.
func withoutLiveAcceleratorConfig(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, bool, error) {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: acceleratorConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return objs, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading ConfigMap %s/%s: %w", operatorNamespace, acceleratorConfigMap, err)
	}
	kept := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetNamespace() == operatorNamespace && o.GetName() == acceleratorConfigMap {
			continue
		}
		kept = append(kept, o)
	}
	return kept, len(kept) < len(objs), nil
}

func (u *up) applyNodeprobe(ctx context.Context) error {
	objs, err := nodeprobeObjects(u.image("mlkube/nodeprobe", nodeprobeDevImage), u.version)
	if err != nil {
		return err
	}
	applied, err := manifests.Apply(ctx, u.kube, objs)
	if err != nil {
		return err
	}
	return steps.Done("Applied the nodeprobe manifests: %s", applied)
}

// waitNodeprobe waits for the DaemonSet to run its new image, ready, on every node.
func (u *up) waitNodeprobe(ctx context.Context) error {
	key := client.ObjectKey{Namespace: nodeprobeNamespace, Name: nodeprobeDaemonSet}
	ready := manifests.DaemonSetRolledOut(u.kube, key)
	image := u.image("mlkube/nodeprobe", nodeprobeDevImage)
	if ok, _, err := ready(ctx); err == nil && ok {
		if u.appliedEarly() {
			return steps.Done("nodeprobe running %s on %s, started while the cluster was created", image, u.nodeprobeNodes(ctx))
		}
		return steps.Done("nodeprobe already running %s on %s", image, u.nodeprobeNodes(ctx))
	}
	wctx, cancel := context.WithTimeout(ctx, u.opts.Wait)
	defer cancel()
	err := manifests.Wait(wctx, time.Second, ready)
	if err == nil {
		return steps.Done("nodeprobe running %s on %s", image, u.nodeprobeNodes(ctx))
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	kubectl := fmt.Sprintf("kubectl --context %s -n %s", u.cluster.Context(), nodeprobeNamespace)
	diagnosis := manifests.DiagnoseDaemonSet(dctx, u.kube.kube, key, kubectl)
	return fmt.Errorf("nodeprobe is not ready after %s: %w\n%s", u.opts.Wait, err, strings.TrimRight(diagnosis, "\n"))
}

func (u *up) nodeprobeNodes(ctx context.Context) string {
	ds := &appsv1.DaemonSet{}
	if err := u.kube.Get(ctx, client.ObjectKey{Namespace: nodeprobeNamespace, Name: nodeprobeDaemonSet}, ds); err != nil {
		return "every node"
	}
	return fmt.Sprintf("%d node(s)", ds.Status.NumberReady)
}

// image is the reference devctl built for the image called name, or fallback.
func (u *up) image(name, fallback string) string {
	for _, b := range u.built {
		if b.Name == name {
			return b.Ref.String()
		}
	}
	return fallback
}

// nodeprobeHealth is the DaemonSet's line of `devctl status`.
func nodeprobeHealth(ctx context.Context, kube client.Client) string {
	ds := &appsv1.DaemonSet{}
	err := kube.Get(ctx, client.ObjectKey{Namespace: nodeprobeNamespace, Name: nodeprobeDaemonSet}, ds)
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
	version := ds.Annotations[versionAnnotation]
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
}

// gpuHealth is the GPUs line of `devctl status`: what the accelerator config holds, and what
// the nodes' nodeprobes found.
func gpuHealth(ctx context.Context, kube client.Client, nodes []corev1.Node) string {
	var cm corev1.ConfigMap
	err := kube.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: acceleratorConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("no accelerator config (ConfigMap %s/%s missing; run `devctl up`)", operatorNamespace, acceleratorConfigMap)
	}
	if err != nil {
		return "cannot tell: " + err.Error()
	}
	return describeGPUs(cm.Data[acceleratorKey], nodes)
}

// describeGPUs says what an accelerator config configures, and which nodes reported a GPU.
func describeGPUs(config string, nodes []corev1.Node) string {
	var gpuNodes []string
	probed := 0
	for _, n := range nodes {
		raw, ok := n.Annotations[gpuDriverAnnotation]
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
		resources = append(resources, fmt.Sprintf("%s (%d volumes, %d env vars)", name, len(a.Volumes), len(a.EnvVars)))
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
