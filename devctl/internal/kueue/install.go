package kueue

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/manifests"
)

// DeploymentKey names Kueue's manager Deployment.
var DeploymentKey = client.ObjectKey{Namespace: Namespace, Name: Deployment}

// NamespaceObject is Kueue's namespace, which the chart does not create (helm install
// --create-namespace does).
func NamespaceObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata":   map[string]any{"name": Namespace},
	}}
}

// SplitCRDs parts objs into the CRDs and the rest, each in its order.
func SplitCRDs(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}

// MarkVersion records version on the manager's Deployment among objs (VersionAnnotation).
func MarkVersion(objs []*unstructured.Unstructured, version string) error {
	d := manifests.Find(objs, "Deployment", Namespace, Deployment)
	if d == nil {
		return fmt.Errorf("Kueue's chart rendered no Deployment %s", DeploymentKey)
	}
	annotations := d.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[VersionAnnotation] = version
	d.SetAnnotations(annotations)
	return nil
}

// Installed reports the Kueue version devctl installed in the cluster, "" when it has not (no
// Deployment of Kueue's with devctl's annotation).
func Installed(ctx context.Context, c client.Client) (string, error) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, DeploymentKey, d)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("looking for Kueue's Deployment %s: %w", DeploymentKey, err)
	}
	return d.Annotations[VersionAnnotation], nil
}

// webhookProbe is the ResourceFlavor whose dry-run create tells that Kueue's webhooks answer.
const webhookProbe = "devctl-webhook-probe"

// WebhookAnswers is ready when Kueue's webhooks answer: a dry-run create of a ResourceFlavor,
// which Kueue's mutating and validating webhooks both see, succeeds. Until Kueue's manager has
// made its certificate and put its CA into the webhook configurations, and serves, the apiserver
// refuses it, "failed calling webhook ...".
func WebhookAnswers(c client.Client) manifests.Check {
	return func(ctx context.Context) (bool, string, error) {
		rf := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": APIVersion,
			"kind":       "ResourceFlavor",
			"metadata":   map[string]any{"name": webhookProbe},
		}}
		err := c.Create(ctx, rf, client.DryRunAll)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, "", nil
		}
		return false, "Kueue's webhook to answer (a dry-run create of a ResourceFlavor: " + oneLine(err.Error()) + ")", nil
	}
}

// QueueResult is what applying one of the default queueing objects did.
type QueueResult struct {
	Object *unstructured.Unstructured
	// What is "created", "unchanged", "updated" or "kept as changed by hand".
	What string
	// Conflict is, when kept, the apiserver's word on the fields changed by hand.
	Conflict string
}

// Describe names the object as up prints it: `ClusterQueue "mlkube"`, `LocalQueue "default" in
// namespace default`.
func Describe(o *unstructured.Unstructured) string {
	s := fmt.Sprintf("%s %q", o.GetKind(), o.GetName())
	if ns := o.GetNamespace(); ns != "" {
		s += " in namespace " + ns
	}
	return s
}

func (r QueueResult) String() string { return Describe(r.Object) + " " + r.What }

// ApplyQueues applies the default queueing objects (Queues) with server-side apply, without
// forcing: devctl owns the fields it sets while nobody else changes them, so that a new quota
// (the nodes changed) reaches the ClusterQueue; a field changed by hand since (kubectl edit
// clusterqueue mlkube) conflicts, and the object is kept as it is, which the result says.
// Deleting the object and running devctl up --kueue again makes devctl's anew.
func ApplyQueues(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) ([]QueueResult, error) {
	var results []QueueResult
	for _, o := range objs {
		before := o.DeepCopy()
		err := c.Get(ctx, client.ObjectKeyFromObject(o), before)
		if err != nil && !apierrors.IsNotFound(err) {
			return results, fmt.Errorf("reading %s: %w", Describe(o), err)
		}
		existed := err == nil
		after := o.DeepCopy()
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(after), client.FieldOwner(manifests.FieldOwner))
		r := QueueResult{Object: o}
		switch {
		case apierrors.IsConflict(err):
			r.What, r.Conflict = "kept as changed by hand", conflictFields(err)
		case err != nil:
			return results, fmt.Errorf("applying %s: %w", Describe(o), err)
		case !existed:
			r.What = "created"
		case after.GetResourceVersion() != before.GetResourceVersion():
			r.What = "updated"
		default:
			r.What = "unchanged"
		}
		results = append(results, r)
	}
	return results, nil
}

// conflictFields is the part of an apply conflict that names the fields and their managers.
func conflictFields(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "conflict: "); ok {
		msg = after
	}
	return oneLine(msg)
}

// StatusLine is Kueue's line of devctl status: its version, whether its manager is available,
// and the ClusterQueues with their workloads.
func StatusLine(ctx context.Context, c client.Client) string {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, DeploymentKey, d)
	if apierrors.IsNotFound(err) {
		return "not installed (devctl up --kueue installs it)"
	}
	if err != nil {
		return "cannot tell: " + err.Error()
	}
	version := d.Annotations[VersionAnnotation]
	if version == "" {
		version = "version unknown (not installed by devctl)"
	}
	health := "not available"
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable {
			if cond.Status == corev1.ConditionTrue {
				health = "Available"
			} else if cond.Message != "" {
				health = "not available: " + cond.Message
			}
		}
	}
	return fmt.Sprintf("%s, %s, ClusterQueues: %s", version, health, clusterQueues(ctx, c))
}

// clusterQueues lists the ClusterQueues with their workloads: "mlkube (1 admitted, 2 pending)".
func clusterQueues(ctx context.Context, c client.Client) string {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(APIVersion)
	list.SetKind("ClusterQueueList")
	if err := c.List(ctx, list); err != nil {
		return "cannot list: " + oneLine(err.Error())
	}
	if len(list.Items) == 0 {
		return "none"
	}
	var out []string
	for _, cq := range list.Items {
		admitted, _, _ := unstructured.NestedInt64(cq.Object, "status", "admittedWorkloads")
		pending, _, _ := unstructured.NestedInt64(cq.Object, "status", "pendingWorkloads")
		out = append(out, fmt.Sprintf("%s (%d admitted, %d pending; quota %s; in use %s)", cq.GetName(), admitted, pending,
			DescribeQuota(nominalQuota(cq)), DescribeQuota(usageOf(cq))))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// nominalQuota is a ClusterQueue's nominal quota, summed over its flavors.
func nominalQuota(cq unstructured.Unstructured) corev1.ResourceList {
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	out := corev1.ResourceList{}
	for _, g := range groups {
		flavors, _, _ := unstructured.NestedSlice(asMap(g), "flavors")
		for _, f := range flavors {
			addQuantities(out, asMap(f), "nominalQuota")
		}
	}
	return out
}

// usageOf is what a ClusterQueue's admitted workloads hold of it (status.flavorsReservation),
// summed over its flavors.
func usageOf(cq unstructured.Unstructured) corev1.ResourceList {
	flavors, _, _ := unstructured.NestedSlice(cq.Object, "status", "flavorsReservation")
	out := corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{Format: resource.DecimalSI}}
	for _, f := range flavors {
		addQuantities(out, asMap(f), "total")
	}
	return out
}

// addQuantities adds to out the quantity under key of each of a flavor's resources.
func addQuantities(out corev1.ResourceList, flavor map[string]any, key string) {
	resources, _, _ := unstructured.NestedSlice(flavor, "resources")
	for _, r := range resources {
		name, _, _ := unstructured.NestedString(asMap(r), "name")
		value, _, _ := unstructured.NestedFieldNoCopy(asMap(r), key)
		q, err := resource.ParseQuantity(fmt.Sprint(value))
		if name == "" || err != nil {
			continue
		}
		sum := out[corev1.ResourceName(name)]
		sum.Add(q)
		out[corev1.ResourceName(name)] = sum
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if line, _, ok := strings.Cut(s, "\n"); ok {
		return line + " ..."
	}
	return s
}
