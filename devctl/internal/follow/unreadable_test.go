package follow

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job of any kind that becomes unreadable while followed (its TTL set to a number int32
// cannot hold, while the CRD allowed it) ends the following with an error that names the field
// and what to do, after a line saying so; following a job that is unreadable already fails at
// once. Nothing hangs.
func TestFollowStopsAtAnUnreadableJob(t *testing.T) {
	ns := namespace(t) // no operator: it is not this test's to say what it does with such a job
	ctx := context.Background()
	type followed struct {
		res *Result
		err error
	}
	results := map[*v1beta1.Kind]chan followed{}
	status := map[*v1beta1.Kind]*syncBuffer{}
	var jobs []client.Object
	for _, k := range v1beta1.Kinds {
		job := jobtest.NewJob(k, ns, "later-"+k.Label())
		must(t, k8s.Create(ctx, job))
		jobs = append(jobs, job)
		results[k], status[k] = make(chan followed, 1), &syncBuffer{}
		mine := job.DeepCopyObject().(client.Object) // the test writes into job meanwhile
		go func() {
			res, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: mine, MatchUID: true, States: true, Status: status[k]})
			results[k] <- followed{res, err}
		}()
	}
	// Following has begun once it tells a status write.
	for i, job := range jobs {
		must(t, jobtest.Retry(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
				return err
			}
			job.(v1beta1.Job).JobStatus().Phase = v1beta1.JobPhaseCreating
			return k8s.Status().Update(ctx, job)
		}))
		eventually(t, "following "+job.GetName(), func() error {
			if s := status[v1beta1.Kinds[i]].String(); !strings.Contains(s, "phase Creating") {
				return fmt.Errorf("said %q", s)
			}
			return nil
		})
	}

	restore := jobtest.Loosen(t, jobtest.Config, []string{jobtest.UnreadableTTLField}, v1beta1.Kinds...)
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"runPolicy":{"ttlSecondsAfterFinished":%d}}}`, jobtest.UnreadableTTL)))
	for _, job := range jobs {
		eventually(t, "making "+job.GetName()+" unreadable", func() error {
			// The CRD as loosened takes a moment to apply: a refusal is tried again.
			return k8s.Patch(ctx, job.DeepCopyObject().(client.Object), patch)
		})
	}
	restore()

	for _, k := range v1beta1.Kinds {
		name := "later-" + k.Label()
		select {
		case f := <-results[k]:
			want := fmt.Sprintf("cannot follow %s in namespace %s: it is unreadable (%s); %s", k.Ref(name), ns, jobtest.UnreadableTTLWhy, v1beta1.UnreadableHint)
			if f.err == nil || f.err.Error() != want {
				t.Errorf("%s: Follow returned %v, want %s", k.Ref(name), f.err, want)
			}
			if f.res == nil || f.res.Unreadable != jobtest.UnreadableTTLWhy {
				t.Errorf("%s: result %+v", k.Ref(name), f.res)
			}
			if line := " unreadable: " + jobtest.UnreadableTTLWhy; !strings.Contains(status[k].String(), line) {
				t.Errorf("%s: no %q in:\n%s", k.Ref(name), line, status[k].String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("following %s did not end once it became unreadable", k.Ref(name))
		}
		res, err := Follow(ctx, Options{Config: jobtest.Config, Scheme: operator.Scheme(), Job: jobtest.NewJob(k, ns, name)})
		if err == nil || !strings.Contains(err.Error(), "it is unreadable ("+jobtest.UnreadableTTLWhy+")") || res == nil || res.Ended {
			t.Errorf("following %s, unreadable already: %+v, %v", k.Ref(name), res, err)
		}
	}
}

// Without MatchUID, devctl logs -f follows whatever job has the name: the pods of a new job of
// the name may come before the job does, and are followed once it has come. A pod its job does
// not control, labelled like one of its replicas, is never followed.
func TestPodsOfANewJobBeforeTheJob(t *testing.T) {
	kind := v1beta1.Kinds[0]
	old := jobtest.NewJob(kind, "ns", "again")
	old.SetUID("old")
	f := &follower{
		o: Options{Job: old, Printer: NewPrinter(old, false, false)}, kind: kind, jobs: newJobTracker(),
		replicas: newReplicaTracker(), later: map[types.UID]*corev1.Pod{}, res: &Result{Job: old},
	}
	pod := func(name string, owner types.UID) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{
			v1beta1.LabelJobName: "again", v1beta1.LabelJobKind: kind.Label(), v1beta1.LabelReplicaType: "worker", v1beta1.LabelReplicaIndex: "0",
		}}}
		if owner != "" {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1beta1.GroupVersion.String(), Kind: kind.Name, Name: "again", UID: owner, Controller: &yes}}
		}
		return p
	}
	f.onPod(pod("by-hand", ""), false)
	f.onPod(pod("new-worker-0", "new"), false)
	if len(f.replicas.pods) != 0 {
		t.Fatalf("followed pods the job followed does not control: %v", f.replicas.pods)
	}
	newer := jobtest.NewJob(kind, "ns", "again")
	newer.SetUID("new")
	f.onJob(newer, false)
	if p := f.replicas.pods["worker-0"]; p == nil || p.Name != "new-worker-0" {
		t.Fatalf("the new job's pod, come before it, is not followed: %v", f.replicas.pods)
	}
	f.onPod(pod("by-hand", ""), false)
	if p := f.replicas.pods["worker-0"]; p.Name != "new-worker-0" {
		t.Errorf("a pod made by hand took worker-0's place: %s", p.Name)
	}
}
