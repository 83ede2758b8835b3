package config_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// jobOf is the conformance kit's job of fw's kind (its deciding type, then two WORKERs; or one
// group, of a kind's one type) as a manifest, with edit applied to its replicaSpecs.
func jobOf(t *testing.T, fw replicajob.Framework, ns, name string, edit func(specs []any) []any) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(jobtest.KindOf(fw).NewJob(ns, name, v1beta1.RunPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	specs, _, _ := unstructured.NestedSlice(obj, "spec", "replicaSpecs")
	jobtest.Must(t, unstructured.SetNestedSlice(obj, edit(specs), "spec", "replicaSpecs"))
	return u
}

// The rules that keep a kind's processes from starting with a wrong env live in its CRD: the
// apiserver refuses such a job at create, naming the field and the fix.
func TestEachKindsRules(t *testing.T) {
	ns := jobtest.Namespace(t)
	// group i of specs; -1 is the last: the WORKERs, or the group of a kind of one type.
	group := func(specs []any, i int) map[string]any { return specs[(i+len(specs))%len(specs)].(map[string]any) }
	set := func(i int, field string, v any) func([]any) []any {
		return func(specs []any) []any { group(specs, i)[field] = v; return specs }
	}
	drop := func(i int) func([]any) []any {
		return func(specs []any) []any { return append(specs[:i:i], specs[i+1:]...) }
	}
	inPodSpec := func(field string, v any) func([]any) []any {
		return func(specs []any) []any {
			group(specs, -1)["template"].(map[string]any)["spec"].(map[string]any)[field] = v
			return specs
		}
	}
	noImage := func(specs []any) []any {
		tmpl := group(specs, -1)["template"].(map[string]any)
		delete(tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any), "image")
		return specs
	}
	renameContainer := func(specs []any) []any {
		tmpl := group(specs, -1)["template"].(map[string]any)
		tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["name"] = "main"
		return specs
	}
	for _, fw := range operator.Frameworks {
		k := fw.Kind()
		decider := k.Types[0]
		for _, tc := range []struct {
			what string
			edit func([]any) []any
			want string
		}{
			{"no " + decider, drop(0), "replicaSpecs needs a " + decider + " group"},
			{"an unknown type", set(-1, k.TypeField, "BOGUS"), `Unsupported value: "BOGUS"`},
			{"no " + k.Container + " container", renameContainer, fmt.Sprintf("needs a container named '%s'", k.Container)},
			{"no replicas", set(-1, "replicas", int64(0)), "should be greater than or equal to 1"},
			{"10001 replicas", set(-1, "replicas", int64(10001)), "should be less than or equal to 10000"},
			{"a hostname in a template", inPodSpec("hostname", "mine"), `template.spec.hostname: Invalid value: "string": is set by the operator`},
			{"a subdomain in a template", inPodSpec("subdomain", ""), `template.spec.subdomain: Invalid value: "string": is set by the operator`},
			{"a container without an image", noImage, "template.spec.containers[0].image: Required value"},
			{"an init container with an empty image", inPodSpec("initContainers", []any{map[string]any{"name": "setup", "image": ""}}), "template.spec.initContainers[0].image: Invalid value: \"\": "},
			{"two of " + decider, set(0, "replicas", int64(2)), "exactly one replica"},
		} {
			if k.Name == "TfJob" && tc.what == "no "+decider {
				continue // a TfJob without a MASTER has its WORKER decide
			}
			if len(k.Types) == 1 && tc.what == "two of "+decider {
				continue // a kind of one type: its group is all the replicas, and replica 0 decides
			}
			t.Run(k.Name+"/"+tc.what, func(t *testing.T) {
				job := jobOf(t, fw, ns, strings.ToLower(k.Name)+"-rules", tc.edit)
				err := jobtest.Client.Create(context.Background(), job)
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("create: %v, want Invalid containing %q", err, tc.want)
				}
			})
		}
	}
}
