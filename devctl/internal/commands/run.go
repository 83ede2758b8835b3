package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/follow"
	"github.com/mlkube/mlkube/devctl/internal/images/docker"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// RunOptions are the settings of `devctl run`.
type RunOptions struct {
	// File holds the job (a TfJob or an MXJob), in any format the convert package reads; "-" is
	// the standard input.
	File  string
	Stdin io.Reader
	// Namespace overrides the manifest's; empty: the manifest's, else the context's.
	Namespace string
	// Replace deletes a job of the same name (and waits until it is gone) before creating.
	Replace bool
	// Rm deletes the job once it has ended (not when following stops before).
	Rm bool
	// Watch submits the job again each time File changes, until interrupted.
	Watch bool
	// Timeout, when set, stops following after that long (ExitTimeout); the job goes on.
	Timeout time.Duration
	// PendingTimeout, when set, gives up on a job that has been Waiting that long (an image no
	// one can pull, no node that fits): ExitFailed, and with Rm the job is deleted.
	PendingTimeout time.Duration
	// Debounce is how long File must rest after a change before --watch acts; default 300ms.
	Debounce time.Duration
	// DeleteWait bounds the wait for a replaced job to be gone; default 2m.
	DeleteWait time.Duration
}

// errTimeout is the cause of the context that --timeout ends.
var errTimeout = errors.New("--timeout passed")

// Run submits the job (of any kind of the table) of o.File to the cluster of the current kubeconfig
// context and follows it until it ends: replica states and the job's status on status, every
// replica's log on out. The error carries the exit code (ExitError): nil when the job
// succeeded, ExitFailed when it failed, ExitUsage when there was nothing valid to submit,
// ExitTimeout and ExitInterrupted when following stopped first.
func Run(ctx context.Context, o RunOptions, out, status io.Writer) error {
	if o.Watch && o.File == "-" {
		return UsageError(errors.New("--watch needs a file to watch, not the standard input"))
	}
	if o.Debounce == 0 {
		o.Debounce = 300 * time.Millisecond
	}
	if o.DeleteWait == 0 {
		o.DeleteWait = 2 * time.Minute
	}
	job, err := loadJob(o.File, o.Stdin, status)
	if err != nil {
		return err
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.Timeout, errTimeout)
		defer cancel()
	}
	check := checkImages(ctx, currentContext(), job)
	cl, err := connectCurrent(ctx)
	if err != nil {
		return err
	}
	if err := cl.serves(follow.KindOf(job)); err != nil {
		return err
	}
	r := &runner{o: o, cl: cl, logColor: colorful(out), stateColor: colorful(status)}
	r.live, r.out, r.status = liveLine(out, status)
	if err := r.setNamespace(job); err != nil {
		return err
	}
	if err := r.validate(ctx, job); err != nil {
		return err
	}
	if err := r.ensureImages(ctx, check); err != nil {
		return err
	}
	why := ""
	if o.Replace {
		why = "--replace"
	}
	// --watch watches the file from before the first submit: a save made while it is submitted
	// is not lost.
	var changes <-chan struct{}
	if o.Watch {
		if changes, err = fileChanges(ctx, o.File, o.Debounce); err != nil {
			return err
		}
	}
	created, err := r.submit(ctx, job, why)
	if err != nil {
		return r.interrupted(ctx, nil, err)
	}
	if o.Watch {
		return r.watch(ctx, created, changes)
	}
	res, err := r.follow(ctx, created)
	if (res == nil || !res.Ended) && ctx.Err() != nil {
		return r.interrupted(ctx, created, err)
	}
	return r.report(ctx, created, res, err)
}

type runner struct {
	o                    RunOptions
	cl                   *current
	out, status          io.Writer
	logColor, stateColor bool
	// live is the progress line at the bottom of the terminal; nil when status is none.
	live      *follow.LiveLine
	submitted time.Time
	// local are the job's images in a kind cluster (load.go); nil for another cluster.
	local *jobImages
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.status, format+"\n", args...)
}

// liveLine keeps the progress line at the bottom of status when status is a terminal
// (steps.IsTerminal, as for devctl up's spinner) and returns the writers that put their lines
// above it: status's, and out's when out writes to a terminal too (the same screen, as a rule;
// logs going to a file need no room made for them). Elsewhere (a file, a pipe, CI) there is
// none, and the progress comes as lines (follow.Options.Live).
func liveLine(out, status io.Writer) (*follow.LiveLine, io.Writer, io.Writer) {
	if !steps.IsTerminal(status) {
		return nil, out, status
	}
	live := follow.NewLiveLine(status)
	if steps.IsTerminal(out) {
		out = live.Writer(out)
	}
	return live, out, live.Writer(status)
}

// setNamespace puts the job in --namespace, else the manifest's namespace, else the context's;
// a manifest and a flag that disagree are a usage error, as with kubectl.
func (r *runner) setNamespace(job client.Object) error {
	switch {
	case r.o.Namespace != "" && job.GetNamespace() != "" && job.GetNamespace() != r.o.Namespace:
		return UsageError(fmt.Errorf("%s puts %s in namespace %s, but --namespace says %s: drop one of them", r.o.File, follow.Ref(job), job.GetNamespace(), r.o.Namespace))
	case r.o.Namespace != "":
		job.SetNamespace(r.o.Namespace)
	case job.GetNamespace() == "":
		job.SetNamespace(r.cl.Namespace)
	}
	return nil
}

// validate has the apiserver check the job without creating it (a server-side dry run): the
// CRD's schema and rules, the same checks a real create runs. A job of the same name existing
// is no reason to refuse this one: the apiserver validates before it looks for it.
func (r *runner) validate(ctx context.Context, job client.Object) error {
	err := r.cl.Client.Create(ctx, copyOf(job), client.DryRunAll)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case invalidCauses(err) != nil:
		return UsageError(fmt.Errorf("%s in %s is invalid; nothing was created:\n  %s", follow.Ref(job), r.o.File, strings.Join(invalidCauses(err), "\n  ")))
	case apierrors.IsNotFound(err):
		ns := job.GetNamespace()
		return UsageError(fmt.Errorf("namespace %s does not exist in the cluster at context %s: kubectl create namespace %s, or pick another with --namespace", ns, r.cl.Context, ns))
	}
	return err
}

// copyOf is a deep copy of a job, to hand to a call that writes into it.
func copyOf(job client.Object) client.Object { return job.DeepCopyObject().(client.Object) }

// submit creates the job. One of the same name is an error unless why names the flag that
// replaces it: then it is deleted, with its pods (foreground), and gone, before the create.
func (r *runner) submit(ctx context.Context, job client.Object, why string) (client.Object, error) {
	ref := follow.Ref(job)
	for attempt := 0; ; attempt++ {
		created := copyOf(job)
		r.submitted = time.Now()
		err := r.cl.Client.Create(ctx, created)
		switch {
		case err == nil:
			r.say("created %s in namespace %s (context %s)", ref, created.GetNamespace(), r.cl.Context)
			return created, nil
		case apierrors.IsAlreadyExists(err) && why == "":
			return nil, UsageError(r.exists(ctx, job))
		case apierrors.IsAlreadyExists(err) && attempt < 3:
			if err := r.deleteAndWait(ctx, follow.KindOf(job), job.GetNamespace(), job.GetName(), why); err != nil {
				return nil, err
			}
		case invalidCauses(err) != nil:
			return nil, UsageError(fmt.Errorf("%s is invalid; nothing was created:\n  %s", ref, strings.Join(invalidCauses(err), "\n  ")))
		default:
			return nil, fmt.Errorf("creating %s: %w", ref, err)
		}
	}
}

// exists is the error for a job of the same name as job already existing: an unreadable one
// (v1beta1.Job.Unreadable) is said to be, with why, for nothing of it can be followed.
func (r *runner) exists(ctx context.Context, job client.Object) error {
	ref := follow.Ref(job)
	old := follow.KindOf(job).New()
	if err := r.cl.Client.Get(ctx, client.ObjectKeyFromObject(job), old); err == nil && old.Unreadable() != "" {
		return fmt.Errorf("%s already exists in namespace %s and is unreadable (%s); %s. --replace deletes it, with its pods, and creates the one of %s", ref, job.GetNamespace(), old.Unreadable(), v1beta1.UnreadableHint, r.o.File)
	}
	return fmt.Errorf("%s already exists in namespace %s: --replace deletes it, with its pods, and creates it again", ref, job.GetNamespace())
}

// deleteAndWait deletes the job of the kind with foreground propagation, so that its pods go
// first, and watches until it is gone.
func (r *runner) deleteAndWait(ctx context.Context, kind *v1beta1.Kind, ns, name, why string) error {
	ref := kind.Ref(name)
	wctx, cancel := context.WithTimeout(ctx, r.o.DeleteWait)
	defer cancel()
	failed := func(err error) error {
		if ctx.Err() == nil && wctx.Err() != nil {
			return fmt.Errorf("%s is still being deleted after %s: its pods may not stop (kubectl get pods -n %s -l mlkube.io/job-name=%s,mlkube.io/job-kind=%s)", ref, r.o.DeleteWait, ns, name, kind.Label())
		}
		return err
	}
	started := time.Now()
	said := false
	for {
		list := kind.NewList()
		if err := r.cl.Client.List(wctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name}); err != nil {
			return failed(err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return failed(err)
		}
		if len(items) == 0 {
			if said {
				r.say("deleted %s and its pods (%s)", ref, steps.Duration(time.Since(started)))
			}
			return nil
		}
		old := items[0].(client.Object)
		if !said {
			if u := follow.Unreadable(old); u != "" {
				why += "; it is unreadable: " + u
			}
			r.say("deleting %s (%s) and waiting until it and its pods are gone ...", ref, why)
			said = true
		}
		if old.GetDeletionTimestamp() == nil {
			uid := old.GetUID()
			err := r.cl.Client.Delete(wctx, old, client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &uid})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return failed(fmt.Errorf("deleting %s: %w", ref, err))
			}
		}
		w, err := r.cl.Client.Watch(wctx, kind.NewList(), client.InNamespace(ns), client.MatchingFields{"metadata.name": name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			return failed(err)
		}
		gone := waitDeleted(wctx, w, old)
		w.Stop()
		if err := wctx.Err(); err != nil {
			return failed(err)
		}
		if gone {
			r.say("deleted %s and its pods (%s)", ref, steps.Duration(time.Since(started)))
			return nil
		}
		// The watch ended early (the apiserver closes them now and then): look again.
	}
}

// waitDeleted reads the watch until it reports old deleted (true), or it ends (false).
func waitDeleted(ctx context.Context, w watch.Interface, old client.Object) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false
			}
			if job, isJob := ev.Object.(client.Object); isJob && ev.Type == watch.Deleted && job.GetUID() == old.GetUID() {
				return true
			}
		}
	}
}

func (r *runner) follow(ctx context.Context, job client.Object) (*follow.Result, error) {
	return follow.Follow(ctx, follow.Options{
		Config: r.cl.Config, Scheme: r.cl.Scheme, Job: job, MatchUID: true,
		States: true, Status: r.status, Logs: newLogSource(r.cl.Kube), Out: r.out, Live: r.live,
		Printer: follow.NewPrinter(job, r.logColor, r.stateColor),
		Start:   r.submitted, Hint: 30 * time.Second, PendingTimeout: r.o.PendingTimeout, WaitingHint: func(c metav1.Condition) string { return docker.WaitingHint(c.Reason, c.Message) },
	})
}

// report says how the job ended and deletes it with --rm: nil when it succeeded, an ExitError
// with the Failed condition's message when it failed.
func (r *runner) report(ctx context.Context, job client.Object, res *follow.Result, err error) error {
	if err != nil && (res == nil || !res.Ended) {
		return err
	}
	ref := follow.Ref(job)
	if res.GaveUp != nil {
		defer r.remove(ctx, res.Job)
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("%s waited %s on %s, which needs you: %s", ref, r.o.PendingTimeout, res.GaveUp.Reason, res.GaveUp.Message)}
	}
	if res.Deleted || !res.Ended {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("%s was deleted before it ended", ref)}
	}
	took := steps.Duration(time.Since(r.submitted))
	final := res.Job
	defer r.remove(ctx, final)
	if follow.StatusOf(final).State == v1beta1.JobStateSucceeded {
		msg := ""
		if c := follow.Condition(final, v1beta1.JobSucceeded); c != nil {
			msg = ": " + c.Message
		}
		r.say("%s Succeeded in %s%s", ref, took, msg)
		return nil
	}
	msg := "no Failed condition"
	if c := follow.Condition(final, v1beta1.JobFailed); c != nil {
		msg = c.Message
	}
	// The replica that failed first, above the Failed condition's message that stays the last
	// line: the others may have failed only because it was gone.
	for _, l := range follow.FirstFailure(follow.StatusOf(final).FirstFailure) {
		r.say("%s", l)
	}
	return &ExitError{Code: ExitFailed, Err: fmt.Errorf("%s Failed after %s: %s", ref, took, msg)}
}

// remove deletes the job with --rm, once it ended or was given up on.
func (r *runner) remove(ctx context.Context, job client.Object) {
	if !r.o.Rm {
		return
	}
	err := r.cl.Client.Delete(context.WithoutCancel(ctx), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		r.say("warning: --rm: deleting %s: %v", follow.Ref(job), err)
		return
	}
	r.say("deleted %s (--rm)", follow.Ref(job))
}

// interrupted explains following that stopped before the job ended: Ctrl-C (the job goes on)
// or --timeout. Any other error is returned as it is.
func (r *runner) interrupted(ctx context.Context, job client.Object, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if job == nil {
		if context.Cause(ctx) == errTimeout {
			return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("--timeout %s passed before the job was submitted", r.o.Timeout)}
		}
		return &ExitError{Code: ExitInterrupted, Err: errors.New("interrupted before the job was submitted")}
	}
	if context.Cause(ctx) == errTimeout {
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("stopped following after --timeout %s; %s goes on: %s to follow again", r.o.Timeout, follow.Ref(job), r.logsHint(job))}
	}
	r.say("left %s running; %s to follow again", follow.Ref(job), r.logsHint(job))
	return &ExitError{Code: ExitInterrupted}
}

// logsHint is the command that follows the job again. devctl logs finds a job by its name, so
// the hint names the kind only when a job of another kind has the same name.
func (r *runner) logsHint(job client.Object) string {
	hint := "devctl logs " + job.GetName() + " -f"
	if job.GetNamespace() != r.cl.Namespace {
		hint += " -n " + job.GetNamespace()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kind := follow.KindOf(job)
	for _, other := range v1beta1.Kinds {
		if other != kind && r.cl.serves(other) == nil && r.cl.Client.Get(ctx, client.ObjectKeyFromObject(job), other.New()) == nil {
			return hint + " --kind " + kind.Label()
		}
	}
	return hint
}
