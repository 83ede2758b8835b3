package manifests

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the field manager of everything devctl applies.
const FieldOwner = "devctl"

// Applied counts what an Apply did.
type Applied struct {
	Created, Changed, Unchanged int
}

func (a Applied) String() string {
	return fmt.Sprintf("%d created, %d changed, %d unchanged", a.Created, a.Changed, a.Unchanged)
}

// Apply applies every object, in order, with server-side apply: devctl owns the fields it sets
// and takes them over from whoever set them before (kubectl edit, an older devctl). Applying
// the same objects again changes nothing on the server; what an object holds, before and after,
// tells which objects changed.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (Applied, error) {
	return ApplyRemembering(ctx, c, objs, nil)
}

// ApplyRemembering is Apply that skips the objects that mem says are as its last apply of the
// same manifest left them (see Memory), and records what it applies in mem.
func ApplyRemembering(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, mem *Memory) (Applied, error) {
	var a Applied
	for _, u := range objs {
		id := fmt.Sprintf("%s %s", u.GetKind(), client.ObjectKeyFromObject(u))
		before := &metav1.PartialObjectMetadata{}
		before.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(u), before)
		if err != nil && !apierrors.IsNotFound(err) {
			return a, fmt.Errorf("reading %s: %w", id, err)
		}
		existed := err == nil
		if existed && mem.unchanged(u, before) {
			a.Unchanged++
			continue
		}

		// What the object holds before, read whole only when it is applied again: a controller
		// writing its status (the apiserver type-checking an admission policy, a Deployment's
		// rollout) moves its resource version, and the apply that follows rewrites who manages
		// which field, moving it again, with nothing of the object changed.
		var held *unstructured.Unstructured
		if existed {
			held = &unstructured.Unstructured{}
			held.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), held); err != nil {
				return a, fmt.Errorf("reading %s: %w", id, err)
			}
		}
		after := u.DeepCopy()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(after), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return a, fmt.Errorf("applying %s: %w", id, err)
		}
		mem.remember(u, after)
		switch {
		case !existed:
			a.Created++
		case after.GetResourceVersion() != held.GetResourceVersion() && !equality.Semantic.DeepEqual(content(held), content(after)):
			a.Changed++
		default:
			a.Unchanged++
		}
	}
	return a, nil
}

// content is what an object holds for its users: all but its status and the metadata the
// apiserver keeps on every write (resource version, managed fields, generation).
func content(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	delete(c.Object, "status")
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(c.Object, "metadata", "generation")
	return c.Object
}
