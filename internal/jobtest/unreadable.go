package jobtest

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job the Go types cannot read whole (v1beta1.Job.Unreadable) reaches a real cluster by being
// written while its CRD allowed the value, the CRD bounding the field later. Tests store one the
// same way whatever today's CRD says: the field's schema is loosened for the write and the CRD
// put back, so the tests keep working once the CRD refuses the value.

// UnreadableTTL does not fit ttlSecondsAfterFinished's int32: 30,000 days, a value users wrote
// before the CRD said int32.
const UnreadableTTL int64 = 2592000000

// UnreadableTTLField is the field UnreadableTTL goes in, and UnreadableTTLWhy what
// Unreadable() says of a job that has it.
const (
	UnreadableTTLField = "spec.runPolicy.ttlSecondsAfterFinished"
	UnreadableTTLWhy   = UnreadableTTLField + ": number 2592000000 does not fit int32"
)

// NewJob is a readable job of kind k, built from the kinds table alone: the kit's three
// replicas (kitGroups).
func NewJob(k *v1beta1.Kind, ns, name string) client.Object {
	return newJob(k, ns, name, v1beta1.RunPolicy{})
}

// Unstructured is obj as unstructured, to be given values its Go type cannot hold.
func Unstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Must(t, err)
	return &unstructured.Unstructured{Object: u}
}

// UnreadableJob is NewJob with runPolicy.ttlSecondsAfterFinished UnreadableTTL and status, as
// unstructured (the Go type cannot hold the value): StoreUnreadable stores it, with
// UnreadableTTLField loosened.
func UnreadableJob(t *testing.T, k *v1beta1.Kind, ns, name string, status v1beta1.JobStatus) *unstructured.Unstructured {
	t.Helper()
	u := Unstructured(t, NewJob(k, ns, name))
	Must(t, unstructured.SetNestedField(u.Object, UnreadableTTL, strings.Split(UnreadableTTLField, ".")...))
	Must(t, unstructured.SetNestedField(u.Object, Unstructured(t, &status).Object, "status"))
	return u
}

// StoreUnreadable creates objs, jobs holding values their CRDs may refuse, and writes the
// status of each that has one. Meanwhile the schemas of fields (dotted paths from the object's
// root, e.g. UnreadableTTLField) in the CRD of each kind among objs are loosened, and rules
// that name them are dropped; the CRDs are put back as they were before StoreUnreadable
// returns. A loosened field takes any value (x-kubernetes-preserve-unknown-fields), of its type
// or not: a number int32 cannot hold, a string where a number belongs.
//
// Each CRD is updated twice whatever the number of objects: on a busy machine the apiserver
// takes seconds to take up an update of these large schemas.
func StoreUnreadable(t *testing.T, cfg *rest.Config, fields []string, objs ...*unstructured.Unstructured) {
	t.Helper()
	var kinds []*v1beta1.Kind
	for _, obj := range objs {
		kind := v1beta1.KindNamed(obj.GetKind())
		if kind == nil {
			t.Fatalf("StoreUnreadable: %s is no job kind", obj.GetKind())
		}
		kinds = append(kinds, kind)
	}
	c := crdClient(t, cfg)
	defer Loosen(t, cfg, fields, kinds...)()
	for _, obj := range objs {
		store(t, context.Background(), c, obj, fields)
	}
}

// Loosen loosens fields in the CRDs of kinds as StoreUnreadable does, for a test that writes
// values they may refuse some other way (a patch), and returns what puts the CRDs back.
func Loosen(t *testing.T, cfg *rest.Config, fields []string, kinds ...*v1beta1.Kind) (restore func()) {
	t.Helper()
	c := crdClient(t, cfg)
	var restores []func()
	done := map[*v1beta1.Kind]bool{}
	for _, k := range kinds {
		if !done[k] {
			done[k] = true
			restores = append(restores, loosenCRD(t, context.Background(), c, k.Plural+"."+v1beta1.GroupVersion.Group, fields))
		}
	}
	return func() {
		for _, r := range restores {
			r()
		}
	}
}

func crdClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	Must(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Must(t, err)
	return c
}

// loosenCRD loosens fields in every version's schema of the CRD named crd, and returns what
// puts it back.
func loosenCRD(t *testing.T, ctx context.Context, c client.Client, crd string, fields []string) (restore func()) {
	t.Helper()
	var cur apiextensionsv1.CustomResourceDefinition
	Must(t, c.Get(ctx, client.ObjectKey{Name: crd}, &cur))
	original := cur.Spec.DeepCopy()
	setSpec := func(spec *apiextensionsv1.CustomResourceDefinitionSpec) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: crd}, &cur); err != nil {
				return err
			}
			cur.Spec = *spec.DeepCopy()
			return c.Update(ctx, &cur)
		})
	}
	loose := original.DeepCopy()
	for i := range loose.Versions {
		if s := loose.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			for _, f := range fields {
				path := strings.Split(f, ".")
				schema, ok := loosen(*s.OpenAPIV3Schema, path, path[len(path)-1])
				if !ok {
					t.Fatalf("CRD %s has no field %s", crd, f)
				}
				*s.OpenAPIV3Schema = schema
			}
		}
	}
	Must(t, setSpec(loose))
	return func() {
		if err := setSpec(original); err != nil {
			t.Errorf("putting CRD %s back: %v", crd, err)
		}
	}
}

// store creates obj and writes its status. The apiserver takes a moment to validate with a CRD
// as updated: until then it may refuse the value, so a refusal is tried again.
func store(t *testing.T, ctx context.Context, c client.Client, obj *unstructured.Unstructured, fields []string) {
	t.Helper()
	ref := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	var stored *unstructured.Unstructured
	Eventually(t, "storing "+ref+" with "+strings.Join(fields, ", ")+" loosened", func() error {
		stored = obj.DeepCopy()
		return c.Create(ctx, stored)
	})
	status, ok := obj.Object["status"]
	if !ok {
		return
	}
	Eventually(t, "writing the status of "+ref, func() error {
		stored.Object["status"] = status
		err := c.Status().Update(ctx, stored)
		if apierrors.IsConflict(err) {
			_ = c.Get(ctx, client.ObjectKeyFromObject(stored), stored)
		}
		return err
	})
}

// loosen returns s with the schema at path taking any value, and without the rules on the way
// there that name field (path's last element); false when s has no such path.
func loosen(s apiextensionsv1.JSONSchemaProps, path []string, field string) (apiextensionsv1.JSONSchemaProps, bool) {
	s.XValidations = dropRulesNaming(s.XValidations, field)
	child, ok := s.Properties[path[0]]
	if !ok {
		return s, false
	}
	if len(path) == 1 {
		child = apiextensionsv1.JSONSchemaProps{Description: child.Description, XPreserveUnknownFields: ptr.To(true)}
	} else if child, ok = loosen(child, path[1:], field); !ok {
		return s, false
	}
	s.Properties[path[0]] = child
	return s, true
}

func dropRulesNaming(rules apiextensionsv1.ValidationRules, field string) apiextensionsv1.ValidationRules {
	var out apiextensionsv1.ValidationRules
	for _, r := range rules {
		if !strings.Contains(r.Rule, field) {
			out = append(out, r)
		}
	}
	return out
}
