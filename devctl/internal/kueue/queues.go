package kueue

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// APIVersion is the version of Kueue's API devctl writes the queues in.
const APIVersion = "kueue.x-k8s.io/v1beta2"

// GPU is the resource of NVIDIA's GPUs, counted into the quota when the nodes have any.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Quota is the nominal quota of the ClusterQueue: what the nodes pods can be scheduled on (not
// cordoned, no NoSchedule or NoExecute taint: a multi-node cluster's control plane is left out)
// can still run. That is their allocatable cpu and memory (and nvidia.com/gpu when they have
// any), less what the pods outside any queue request there: the cluster's own (kube-system's,
// the operator's, Kueue's) and any other not admitted by Kueue. A quota of the whole allocatable
// admitted jobs that no node could then schedule, holding the quota until Kueue evicted them.
// Memory is rounded down to whole mebibytes. It returns how many pods it took away.
func Quota(nodes []corev1.Node, pods []corev1.Pod) (corev1.ResourceList, int) {
	sum := corev1.ResourceList{
		corev1.ResourceCPU:    resource.Quantity{Format: resource.DecimalSI},
		corev1.ResourceMemory: resource.Quantity{Format: resource.BinarySI},
	}
	gpus := resource.Quantity{Format: resource.DecimalSI}
	counted := map[string]bool{}
	for _, n := range nodes {
		if !schedulable(n) {
			continue
		}
		counted[n.Name] = true
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := n.Status.Allocatable[name]; ok {
				s := sum[name]
				s.Add(q)
				sum[name] = s
			}
		}
		if q, ok := n.Status.Allocatable[GPU]; ok {
			gpus.Add(q)
		}
	}
	taken := 0
	for _, p := range pods {
		if !counted[p.Spec.NodeName] || !outOfQueue(p) {
			continue
		}
		taken++
		requests := podRequests(p)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			s := sum[name]
			s.Sub(requests[name])
			sum[name] = s
		}
		gpus.Sub(requests[GPU])
	}
	for name, q := range sum {
		if q.Sign() < 0 {
			sum[name] = resource.Quantity{Format: q.Format}
		}
	}
	if gpus.Sign() > 0 {
		sum[GPU] = gpus
	}
	// Memory in whole mebibytes, down: kubelets report kibibytes, unwieldy to read.
	mem := sum[corev1.ResourceMemory]
	sum[corev1.ResourceMemory] = *resource.NewQuantity(mem.Value()/mebibyte*mebibyte, resource.BinarySI)
	return sum, taken
}

// outOfQueue says whether pod holds its node's resources outside Kueue: running or waiting to,
// and no pod of a workload Kueue admitted (which Kueue labels with its pod set).
func outOfQueue(pod corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	_, admitted := pod.Labels[PodSetLabel]
	return !admitted
}

// PodSetLabel is the label Kueue gives the pods of the workloads it admits.
const PodSetLabel = "kueue.x-k8s.io/podset"

// podRequests is what the scheduler reserves for a pod: its containers' requests and sidecars'
// (init containers that keep running), or an init container's alone where that is more, and
// the pod's overhead.
func podRequests(pod corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	add := func(into corev1.ResourceList, l corev1.ResourceList) {
		for name, q := range l {
			s := into[name]
			s.Add(q)
			into[name] = s
		}
	}
	for _, c := range pod.Spec.Containers {
		add(out, c.Resources.Requests)
	}
	sidecars := corev1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(out, c.Resources.Requests)
			add(sidecars, c.Resources.Requests)
			continue
		}
		// An init container runs beside the sidecars started before it.
		alone := corev1.ResourceList{}
		add(alone, sidecars)
		add(alone, c.Resources.Requests)
		for name, q := range alone {
			if q.Cmp(out[name]) > 0 {
				out[name] = q
			}
		}
	}
	add(out, pod.Spec.Overhead)
	return out
}

const mebibyte = 1 << 20

// schedulable says whether pods without tolerations can be scheduled on n.
func schedulable(n corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}

// resourceNames are the quota's resources in order: cpu, memory, then the others by name.
func resourceNames(quota corev1.ResourceList) []corev1.ResourceName {
	rank := func(r corev1.ResourceName) int {
		switch r {
		case corev1.ResourceCPU:
			return 0
		case corev1.ResourceMemory:
			return 1
		}
		return 2
	}
	var names []corev1.ResourceName
	for r := range quota {
		names = append(names, r)
	}
	slices.SortFunc(names, func(a, b corev1.ResourceName) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(string(a), string(b))
	})
	return names
}

// DescribeQuota says a quota the way up prints it: "cpu 2, memory 23Gi".
func DescribeQuota(quota corev1.ResourceList) string {
	var parts []string
	for _, r := range resourceNames(quota) {
		q := quota[r]
		parts = append(parts, fmt.Sprintf("%s %s", r, q.String()))
	}
	return strings.Join(parts, ", ")
}

// managedBy labels the queues as devctl's. The label also gives devctl a field to own in the
// ResourceFlavor, whose spec it leaves empty: an apply that owns nothing leaves the object
// without devctl's managed fields, and the next apply would change them.
func managedBy() map[string]any { return map[string]any{"app.kubernetes.io/managed-by": "devctl"} }

// Queues are the default queueing objects, in the order they apply in: the ResourceFlavor
// Flavor (no node labels: every node), the ClusterQueue ClusterQueue of quota in that flavor,
// open to every namespace, and the LocalQueue LocalQueue in namespace LocalQueueNamespace,
// which queues into it. Only the fields devctl sets: Kueue's webhook defaults the rest.
func Queues(quota corev1.ResourceList) []*unstructured.Unstructured {
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion,
		"kind":       "ResourceFlavor",
		"metadata":   map[string]any{"name": Flavor, "labels": managedBy()},
	}}
	var covered, resources []any
	for _, r := range resourceNames(quota) {
		q := quota[r]
		covered = append(covered, string(r))
		resources = append(resources, map[string]any{"name": string(r), "nominalQuota": q.String()})
	}
	cq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion,
		"kind":       "ClusterQueue",
		"metadata":   map[string]any{"name": ClusterQueue, "labels": managedBy()},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": covered,
				"flavors": []any{map[string]any{
					"name":      Flavor,
					"resources": resources,
				}},
			}},
		},
	}}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion,
		"kind":       "LocalQueue",
		"metadata":   map[string]any{"name": LocalQueue, "namespace": LocalQueueNamespace, "labels": managedBy()},
		"spec":       map[string]any{"clusterQueue": ClusterQueue},
	}}
	return []*unstructured.Unstructured{flavor, cq, lq}
}
