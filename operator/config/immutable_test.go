package config_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/admission"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// transitionMessages are the messages of the admission policy's refusals of updates to
// replicaSpecs (operator/admission): the kind's own, for a job not suspended; the one for the
// set of groups; and the one for a change to a group beyond what Kueue may change.
type transitionMessages struct{ running, groups, group string }

func transitionMessagesOf(t *testing.T, k *v1beta1.Kind) transitionMessages {
	t.Helper()
	return transitionMessages{running: admission.RunningMessage(k), groups: admission.GroupsMessage, group: admission.GroupMessage}
}

// immutableJob is a job of kind k as a manifest spells it, with runPolicy.suspend as given (nil
// leaves it unset), of two groups, the kind's first type and its last (one for a kind of one
// type; one if asked), whose templates have no metadata, as Kueue finds many.
func immutableJob(k *v1beta1.Kind, ns, name string, suspend *bool, oneGroup bool) *unstructured.Unstructured {
	tmpl := func() map[string]any {
		return map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": k.Container, "image": "mlkube/trainer:test"},
		}}}
	}
	groups := []jobtest.Group{{Type: k.Types[0], Replicas: 1, Template: tmpl()}}
	if len(k.Types) > 1 && !oneGroup {
		groups = append(groups, jobtest.Group{Type: k.Types[len(k.Types)-1], Replicas: 2, Template: tmpl()})
	}
	runPolicy := map[string]any{}
	if suspend != nil {
		runPolicy["suspend"] = *suspend
	}
	return &unstructured.Unstructured{Object: jobtest.ManifestOf(k, ns, name, runPolicy, groups...)}
}

// update reads job, applies edit to its spec and sends it back.
func update(t *testing.T, job *unstructured.Unstructured, edit func(spec map[string]any)) error {
	t.Helper()
	jobtest.Must(t, jobtest.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job))
	edit(job.Object["spec"].(map[string]any))
	return jobtest.Client.Update(context.Background(), job)
}

// Edits of a job's spec, in the form a manifest has.
func lastGroup(spec map[string]any) map[string]any {
	groups := spec["replicaSpecs"].([]any)
	return groups[len(groups)-1].(map[string]any)
}

func templateOf(spec map[string]any, part string) map[string]any {
	tmpl := lastGroup(spec)["template"].(map[string]any)
	if tmpl[part] == nil {
		tmpl[part] = map[string]any{}
	}
	return tmpl[part].(map[string]any)
}

func suspend(v bool) func(map[string]any) {
	return func(spec map[string]any) { spec["runPolicy"].(map[string]any)["suspend"] = v }
}

// kueue are what Kueue sets in a group's template when it admits a job, one field each.
var kueue = []struct {
	field string
	set   func(spec map[string]any)
	unset func(spec map[string]any)
}{
	{"labels", func(s map[string]any) {
		templateOf(s, "metadata")["labels"] = map[string]any{"kueue.x-k8s.io/podset": "workers"}
	},
		func(s map[string]any) { delete(templateOf(s, "metadata"), "labels") }},
	{"annotations", func(s map[string]any) {
		templateOf(s, "metadata")["annotations"] = map[string]any{"kueue.x-k8s.io/workload": "job-1234"}
	}, func(s map[string]any) { delete(templateOf(s, "metadata"), "annotations") }},
	{"nodeSelector", func(s map[string]any) {
		templateOf(s, "spec")["nodeSelector"] = map[string]any{"cloud.example.com/pool": "a100"}
	},
		func(s map[string]any) { delete(templateOf(s, "spec"), "nodeSelector") }},
	{"tolerations", func(s map[string]any) {
		templateOf(s, "spec")["tolerations"] = []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}}
	}, func(s map[string]any) { delete(templateOf(s, "spec"), "tolerations") }},
	{"schedulingGates", func(s map[string]any) {
		templateOf(s, "spec")["schedulingGates"] = []any{map[string]any{"name": "kueue.x-k8s.io/topology"}}
	}, func(s map[string]any) { delete(templateOf(s, "spec"), "schedulingGates") }},
}

// all applies edits in order.
func all(edits ...func(map[string]any)) func(map[string]any) {
	return func(spec map[string]any) {
		for _, e := range edits {
			e(spec)
		}
	}
}

func refusedWith(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want Invalid with %q", what, err, want)
	}
}

// A suspended job takes what Kueue changes in its groups' templates to admit it, where its pods
// may run, one field at a time and all of them in the update that resumes it; and their
// restoring in the update that suspends it again, when Kueue evicts it. Every kind alike.
func TestSuspendedJobsTakeKueuesChanges(t *testing.T) {
	ns := jobtest.Namespace(t)
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			job := immutableJob(k, ns, k.Label()+"-kueue", ptr.To(true), false)
			jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
			var sets, unsets []func(map[string]any)
			for _, f := range kueue {
				if err := update(t, job, f.set); err != nil {
					t.Errorf("setting %s while suspended: %v", f.field, err)
				}
				if err := update(t, job, f.unset); err != nil {
					t.Errorf("removing %s while suspended: %v", f.field, err)
				}
				sets, unsets = append(sets, f.set), append(unsets, f.unset)
			}
			if err := update(t, job, all(append(sets, suspend(false))...)); err != nil {
				t.Errorf("admission (all five set, suspend false): %v", err)
			}
			if err := update(t, job, all(append(unsets, suspend(true))...)); err != nil {
				t.Errorf("eviction (all five removed, suspend true): %v", err)
			}
		})
	}
}

// Nothing else of a group changes, suspended or not: its image, its replicas, its volumes, the
// set of groups. The refusal says what may change and when.
func TestSuspendedJobsKeepTheRestOfTheirGroups(t *testing.T) {
	ns := jobtest.Namespace(t)
	for _, k := range v1beta1.Kinds {
		msg := transitionMessagesOf(t, k)
		job := immutableJob(k, ns, k.Label()+"-kept", ptr.To(true), false)
		jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
		single := immutableJob(k, ns, k.Label()+"-single", ptr.To(true), true)
		jobtest.Must(t, jobtest.Client.Create(context.Background(), single))
		image := func(s map[string]any) {
			templateOf(s, "spec")["containers"].([]any)[0].(map[string]any)["image"] = "mlkube/trainer:v2"
		}
		for _, tc := range []struct {
			what string
			job  *unstructured.Unstructured
			edit func(map[string]any)
			want string
		}{
			{"an image", job, image, msg.group},
			{"an image, in the update that resumes the job", job, all(image, kueue[0].set, suspend(false)), msg.group},
			{"replicas", job, func(s map[string]any) { lastGroup(s)["replicas"] = int64(3) }, msg.group},
			{"a volume", job, func(s map[string]any) {
				templateOf(s, "spec")["volumes"] = []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}}
			}, msg.group},
			{"a template's name", job, func(s map[string]any) { templateOf(s, "metadata")["name"] = "mine" }, msg.group},
			{"a group removed", job, func(s map[string]any) { s["replicaSpecs"] = s["replicaSpecs"].([]any)[:1] }, msg.groups},
			{"a group added", single, func(s map[string]any) {
				s["replicaSpecs"] = append(s["replicaSpecs"].([]any),
					map[string]any{k.TypeField: k.Types[len(k.Types)-1], "template": lastGroup(s)["template"]})
			}, msg.groups},
		} {
			t.Run(k.Name+"/"+tc.what, func(t *testing.T) {
				if len(k.Types) == 1 && strings.HasPrefix(tc.what, "a group") {
					t.Skip("a kind of one type has one group, whatever the update")
				}
				refusedWith(t, tc.what, update(t, tc.job, tc.edit), tc.want)
			})
		}
	}
}

// A job that is not suspended takes no change to its groups at all, not even where its pods may
// run: its replicas were told the cluster's shape, and those running stay where they are. The
// refusal gives the kind's reason.
func TestRunningJobsKeepTheirGroups(t *testing.T) {
	ns := jobtest.Namespace(t)
	for _, k := range v1beta1.Kinds {
		msg := transitionMessagesOf(t, k)
		for _, tc := range []struct {
			what    string
			suspend *bool
		}{{"suspend unset", nil}, {"suspend false", ptr.To(false)}} {
			t.Run(k.Name+"/"+tc.what, func(t *testing.T) {
				job := immutableJob(k, ns, k.Label()+"-running-"+strings.Fields(tc.what)[1], tc.suspend, false)
				jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
				err := update(t, job, kueue[2].set)
				refusedWith(t, "nodeSelector", err, msg.running)
				if err != nil && strings.Contains(err.Error(), msg.group) {
					t.Errorf("nodeSelector: the group's rule refused it too, which allows it: %v", err)
				}
				refusedWith(t, "replicas", update(t, job, func(s map[string]any) { lastGroup(s)["replicas"] = int64(3) }), msg.running)
			})
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// A Go client (Kueue's, the operator's) reads a job into its type and sends the whole of it
// back, with what the type always writes (a container's `resources: {}`, a template's
// `metadata: {}`) where the user's manifest had nothing. That rewriting is no change: a running
// job takes it unchanged and suspended (Kueue's eviction), a suspended one with a flavor's
// nodeSelector and resumed (Kueue's admission). Every kind, from the manifest as written.
func TestGoClientsRewriteAJobAsTheyReadIt(t *testing.T) {
	ctx := context.Background()
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			ns := jobtest.Namespace(t)
			typed := func(name string, edit func(v1beta1.Job)) error {
				job := k.New()
				jobtest.Must(t, jobtest.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job))
				edit(job)
				return jobtest.Client.Update(ctx, job)
			}
			running := immutableJob(k, ns, "running", nil, false)
			jobtest.Must(t, jobtest.Client.Create(ctx, running))
			if err := typed("running", func(v1beta1.Job) {}); err != nil {
				t.Errorf("a running job sent back as read: %v", err)
			}
			if err := typed("running", func(j v1beta1.Job) { j.SetSuspend(true) }); err != nil {
				t.Errorf("a running job suspended by a Go client: %v", err)
			}
			suspended := immutableJob(k, ns, "suspended", ptr.To(true), false)
			jobtest.Must(t, jobtest.Client.Create(ctx, suspended))
			if err := typed("suspended", func(j v1beta1.Job) {
				for _, g := range j.Groups() {
					g.Template.Spec.NodeSelector = map[string]string{"cloud.example.com/pool": "a100"}
				}
				j.SetSuspend(false)
			}); err != nil {
				t.Errorf("a suspended job admitted by a Go client: %v", err)
			}
		})
	}
}
