package commands

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/follow"
	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// SuspendOptions are the settings of `devctl suspend` and `devctl resume`.
type SuspendOptions struct {
	Job string
	// Kind is the job's kind; empty: whichever kind has a job of that name.
	Kind string
	// Namespace is the job's; empty: the context's.
	Namespace string
	// Suspend is what runPolicy.suspend becomes: true suspends, false resumes.
	Suspend bool
	// Wait bounds the wait for the operator to say it did it; 0 does not wait.
	Wait time.Duration
}

// Suspend sets the job's runPolicy.suspend and waits until its Suspended condition says the
// operator acted on it: pods deleted, or the replicas being created again.
func Suspend(ctx context.Context, o SuspendOptions, out io.Writer) error {
	cl, err := connectCurrent(ctx)
	if err != nil {
		return err
	}
	if o.Namespace == "" {
		o.Namespace = cl.Namespace
	}
	obj, err := findJob(ctx, cl, LogsOptions{Job: o.Job, Kind: o.Kind, Namespace: o.Namespace})
	if err != nil {
		return err
	}
	job := obj.(v1beta1.Job)
	ref := follow.Ref(obj)
	action, verb, done := "resume", "resumed", "Resumed"
	if o.Suspend {
		action, verb, done = "suspend", "suspended", "Suspended"
	}
	if job.Unreadable() != "" {
		// The operator cannot read it either: nothing would act on runPolicy.suspend.
		return follow.CannotAct(obj, action)
	}
	if st := job.JobStatus(); st.State == v1beta1.JobStateSucceeded || st.State == v1beta1.JobStateFailed {
		return fmt.Errorf("%s already ended (%s): there is nothing to %s", ref, st.State, action)
	}
	if job.Policy().Suspended() == o.Suspend {
		if c := meta.FindStatusCondition(job.JobStatus().Conditions, v1beta1.JobSuspended); o.Suspend || c != nil {
			fmt.Fprintf(out, "%s is %s already (runPolicy.suspend: %t)\n", ref, verb, o.Suspend)
			return nil
		}
		fmt.Fprintf(out, "%s is not suspended\n", ref)
		return nil
	}
	patch := fmt.Sprintf(`{"spec":{"runPolicy":{"suspend":%t}}}`, o.Suspend)
	if err := cl.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("setting runPolicy.suspend of %s: %w", ref, err)
	}
	fmt.Fprintf(out, "%s: runPolicy.suspend set to %t\n", ref, o.Suspend)
	if o.Wait <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	key := client.ObjectKeyFromObject(obj)
	var said string
	err = manifests.Wait(wctx, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		if err := cl.Client.Get(ctx, key, obj); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(obj.(v1beta1.Job).JobStatus().Conditions, v1beta1.JobSuspended)
		if c != nil && c.Reason == done {
			said = c.Message
			return true, "", nil
		}
		return false, "condition Suspended, reason " + done, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%s: runPolicy.suspend is %t, but the operator has not said it %s the job after %s (%v); is it running? (devctl status, kubectl describe %s)", ref, o.Suspend, verb, o.Wait, err, ref)
	}
	fmt.Fprintf(out, "%s %s: %s\n", ref, verb, said)
	return nil
}
