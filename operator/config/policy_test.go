package config_test

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/admission"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// podJob is a job of kind k of one group, the kind's deciding type, whose template edit changes.
func podJob(k *v1beta1.Kind, ns, name string, edit func(template map[string]any)) *unstructured.Unstructured {
	container := map[string]any{"name": k.Container, "image": "mlkube/trainer:test"}
	template := map[string]any{"metadata": map[string]any{}, "spec": map[string]any{"containers": []any{container}}}
	if edit != nil {
		edit(template)
	}
	return &unstructured.Unstructured{Object: jobtest.ManifestOf(k, ns, name, map[string]any{},
		jobtest.Group{Type: k.Deciders[0], Replicas: 1, Template: template})}
}

// metadata sets the template's labels or annotations (field) to the pairs kv.
func metadata(field string, kv ...string) func(map[string]any) {
	return func(t map[string]any) {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		t["metadata"].(map[string]any)[field] = m
	}
}

func labels(kv ...string) func(map[string]any)      { return metadata("labels", kv...) }
func annotations(kv ...string) func(map[string]any) { return metadata("annotations", kv...) }

// resources sets the first container's requests and limits (nil leaves one out).
func resources(requests, limits map[string]any) func(map[string]any) {
	return func(t map[string]any) {
		r := map[string]any{}
		if requests != nil {
			r["requests"] = requests
		}
		if limits != nil {
			r["limits"] = limits
		}
		t["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["resources"] = r
	}
}

// What a pod's own validation would refuse is refused with the job, by the admission policy,
// naming the field, the value and what to write instead; what a pod takes, the job takes. Every
// kind, in dry runs.
func TestPolicyRefusesWhatNoPodCouldCarry(t *testing.T) {
	ctx := context.Background()
	ns := jobtest.Namespace(t)
	gpu := "nvidia.com/gpu"
	for _, tc := range []struct {
		what string
		edit func(map[string]any)
		want []string // nil: accepted
	}{
		{"a label key with a space", labels("model name", "gemma"), []string{`template.metadata.labels: "model name" ` + admission.LabelKeyMessage}},
		{"a label key of two slashes", labels("a/b/c", "x"), []string{`"a/b/c" ` + admission.LabelKeyMessage}},
		{"a prefixed label key", labels("example.com/model", "gemma", "team", "a"), nil},
		{"an annotation key with a space", annotations("my note", "x"), []string{`template.metadata.annotations: "my note" ` + admission.AnnotationKeyMessage}},
		{"an annotation key in capitals", annotations("Example.COM/Note", "x"), nil},
		{"an annotation value with any text", annotations("example.com/note", "google/gemma-2-9b: a model, 0.5 GPU"), nil},
		{"annotations beyond 256 KiB", annotations("example.com/big", strings.Repeat("x", 256*1024)), []string{"template.metadata.annotations: " + admission.AnnotationsMessage}},
		{"a fractional GPU limit", resources(nil, map[string]any{gpu: "0.5"}),
			[]string{"containers[KIND].resources.limits[nvidia.com/gpu]: 0.5 " + admission.WholeMessage}},
		{"a fractional GPU request", resources(map[string]any{gpu: "500m"}, map[string]any{gpu: "500m"}),
			[]string{"resources.requests[nvidia.com/gpu]: 500m " + admission.WholeMessage, "resources.limits[nvidia.com/gpu]: 500m"}},
		{"a TPU topology for a count", resources(nil, map[string]any{"google.com/tpu": "4x4"}),
			[]string{`containers[KIND].resources.limits[google.com/tpu]: "4x4" ` + admission.QuantityMessage}},
		{"a request in words", resources(map[string]any{"memory": "two gigs"}, nil),
			[]string{`resources.requests[memory]: "two gigs" ` + admission.QuantityMessage}},
		{"a GPU request beyond its limit", resources(map[string]any{gpu: 2}, map[string]any{gpu: 1}),
			[]string{"resources.requests[nvidia.com/gpu]: 2 " + admission.EqualMessage + " (1)"}},
		{"whole GPUs, as a number and as a string", resources(map[string]any{gpu: 2, "cpu": "500m"}, map[string]any{gpu: "2", "google.com/tpu": 4}), nil},
		{"a fraction of a native resource", resources(map[string]any{"cpu": "0.5", "memory": "1.5Gi", "hugepages-2Mi": "2Mi"}, nil), nil},
	} {
		for _, k := range v1beta1.Kinds {
			t.Run(tc.what+"/"+k.Name, func(t *testing.T) {
				job := podJob(k, ns, "pod-fields", tc.edit)
				err := jobtest.Client.Create(ctx, job, client.DryRunAll)
				if tc.want == nil {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if !apierrors.IsInvalid(err) {
					t.Fatalf("got %v, want Invalid", err)
				}
				for _, w := range tc.want {
					w = strings.ReplaceAll(w, "KIND", k.Container)
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%v\nwant it to say %q", err, w)
					}
				}
				if want := "spec.replicaSpecs[" + k.Deciders[0] + "]"; !strings.Contains(err.Error(), want) {
					t.Errorf("%v\nwant it to name the group, %s", err, want)
				}
			})
		}
	}
}

// A queue-name label that no LocalQueue can have is refused when it is set, with the value and
// the rule; a queue that could exist is taken, whether it exists or not.
func TestPolicyRefusesAQueueNameNoQueueCanHave(t *testing.T) {
	ctx := context.Background()
	ns := jobtest.Namespace(t)
	k := v1beta1.Kinds[0]
	for _, tc := range []struct {
		queue string
		ok    bool
	}{{"Team-A", false}, {"team_a", false}, {"team..a", false}, {"team-a", true}, {"team-a.gpu", true}} {
		t.Run(tc.queue, func(t *testing.T) {
			job := podJob(k, ns, "queued", nil)
			job.SetLabels(map[string]string{admission.QueueLabel: tc.queue})
			err := jobtest.Client.Create(ctx, job, client.DryRunAll)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `metadata.labels[`+admission.QueueLabel+`]: "`+tc.queue+`" `+admission.QueueMessage)):
				t.Fatalf("got %v, want Invalid naming the label, %q and the rule", err, tc.queue)
			}
		})
	}
}

// A change to a group names the group and the fields that changed, so a user who changed one of
// many fields sees which; the suspended job's refusal says what may change instead.
func TestPolicyNamesWhatChanged(t *testing.T) {
	ns := jobtest.Namespace(t)
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			job := immutableJob(k, ns, k.Label()+"-named", ptr.To(true), false)
			jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
			err := update(t, job, func(s map[string]any) {
				templateOf(s, "spec")["containers"].([]any)[0].(map[string]any)["image"] = "mlkube/trainer:v2"
				templateOf(s, "spec")["nodeSelector"] = map[string]any{"pool": "a100"} // may change
				lastGroup(s)["replicas"] = int64(4)
			})
			want := "spec.replicaSpecs[" + k.Types[len(k.Types)-1] + "]: replicas, template.spec.containers: " + admission.GroupMessage
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v\nwant %q", err, want)
			}
		})
	}
}

// What the policy refuses, a job stored before it (an older mlkube, a cluster that ran without
// it) may still hold: such a job can still be suspended, resumed, written status to and deleted,
// and only an update that changes its groups is checked again.
func TestAJobStoredBeforeThePolicyStaysManageable(t *testing.T) {
	ctx := context.Background()
	ns := jobtest.Namespace(t)
	k := v1beta1.Kinds[0]
	jobtest.Must(t, controlplane.Enforce(jobtest.Config, false))
	job := podJob(k, ns, "older", labels("model name", "gemma"))
	err := jobtest.Client.Create(ctx, job)
	jobtest.Must(t, controlplane.Enforce(jobtest.Config, true))
	jobtest.Must(t, err)

	if err := update(t, job, suspend(true)); err != nil {
		t.Errorf("suspending it: %v", err)
	}
	if err := update(t, job, suspend(false)); err != nil {
		t.Errorf("resuming it: %v", err)
	}
	status := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"startTime": "2026-11-27T10:00:00Z"}}}
	status.SetGroupVersionKind(job.GroupVersionKind())
	status.SetNamespace(ns)
	status.SetName(job.GetName())
	if err := jobtest.Client.Status().Patch(ctx, status, client.Merge); err != nil {
		t.Errorf("a status write: %v", err)
	}
	jobtest.Must(t, update(t, job, suspend(true)))
	err = update(t, job, func(s map[string]any) {
		lastGroup(s)["template"].(map[string]any)["metadata"].(map[string]any)["labels"] = map[string]any{"model name": "llama"}
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), admission.LabelKeyMessage) {
		t.Errorf("a change of its groups: %v, want the label key refused", err)
	}
	if err := jobtest.Client.Delete(ctx, job); err != nil {
		t.Errorf("deleting it: %v", err)
	}
}

// No CRD rule reads oldSelf, and the policy matches no subresource: the apiserver runs every CRD
// rule on every write, status writes too, and a status write must pay for none of the checks of
// how a job changes (docs/performance.md, -costs).
func TestStatusWritesRunNoRuleOnChanges(t *testing.T) {
	for _, k := range v1beta1.Kinds {
		crd, err := config.CRD(k)
		jobtest.Must(t, err)
		config.EachRule(crd, func(path string, r apiextensionsv1.ValidationRule) {
			if strings.Contains(r.Rule, "oldSelf") {
				t.Errorf("%s: %s has a rule on changes, which status writes would run: %s", k.Name, path, r.Rule)
			}
		})
	}
	for _, r := range admission.Policy().Spec.MatchConstraints.ResourceRules {
		for _, res := range r.Resources {
			if strings.Contains(res, "/") || res == "*" {
				t.Errorf("the policy matches %q, a subresource", res)
			}
		}
	}
}
