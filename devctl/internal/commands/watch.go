package commands

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/follow"
)

// watch follows job and, each time the file changes and still holds a valid job, or an image
// the job names gets another image ID in the local Docker engine (a `docker build` again), deletes
// the job (with its pods, waiting until they are gone), loads the images the nodes lack and
// submits the new one, then follows that. It ends only with ctx: Ctrl-C (nil: --watch is ended
// that way) or --timeout (ExitTimeout).
func (r *runner) watch(ctx context.Context, job client.Object, changes <-chan struct{}) error {
	rebuilt := r.imageChanges(ctx)
	type followed struct {
		res *follow.Result
		err error
	}
	for {
		fctx, stop := context.WithCancel(ctx)
		results := make(chan followed, 1)
		go func(job client.Object) {
			res, err := r.follow(fctx, job)
			results <- followed{res, err}
		}(job)
		following := true
		var next client.Object
		for next == nil {
			select {
			case f := <-results:
				following = false
				if err := r.report(ctx, job, f.res, f.err); err != nil && ctx.Err() == nil {
					r.say("error: %v", err)
				}
				if ctx.Err() == nil {
					r.say("waiting for %s to change (Ctrl-C ends)", r.o.File)
				}
				continue
			case <-changes:
				r.say("%s changed: submitting it again", r.o.File)
			case <-rebuilt:
				changed := r.changedImages(ctx)
				if changed == "" {
					continue
				}
				r.say("%s changed in Docker: submitting %s again", changed, r.o.File)
			case <-ctx.Done():
				stop()
				if following {
					<-results
					r.say("left %s running; %s to follow again", follow.Ref(job), r.logsHint(job))
				}
				if context.Cause(ctx) == errTimeout {
					return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("stopped watching after --timeout %s", r.o.Timeout)}
				}
				return nil
			}
			cand, err := r.prepare(ctx)
			if err != nil {
				r.say("error: %v", err)
				r.say("kept %s as it is; waiting for %s to change again", follow.Ref(job), r.o.File)
				continue
			}
			stop()
			if following {
				<-results
				following = false
			}
			if follow.Ref(cand) != follow.Ref(job) || cand.GetNamespace() != job.GetNamespace() {
				if err := r.deleteAndWait(ctx, follow.KindOf(job), job.GetNamespace(), job.GetName(), "--watch"); err != nil {
					return r.interrupted(ctx, nil, err)
				}
			}
			created, err := r.submit(ctx, cand, "--watch")
			if err != nil {
				if ctx.Err() != nil {
					return r.interrupted(ctx, nil, err)
				}
				r.say("error: %v", err)
				r.say("waiting for %s to change (Ctrl-C ends)", r.o.File)
				continue
			}
			next = created
		}
		stop()
		job = next
	}
}

// prepare reads the file again, converts it, has the apiserver validate the job, and loads the
// images it names that the local Docker engine holds and the nodes lack.
func (r *runner) prepare(ctx context.Context) (client.Object, error) {
	job, err := loadJob(r.o.File, nil, r.status)
	if err != nil {
		return nil, err
	}
	check := checkImages(ctx, r.cl.Context, job)
	if err := r.cl.serves(follow.KindOf(job)); err != nil {
		return nil, err
	}
	if err := r.setNamespace(job); err != nil {
		return nil, err
	}
	if err := r.validate(ctx, job); err != nil {
		return nil, err
	}
	if err := r.ensureImages(ctx, check); err != nil {
		return nil, err
	}
	return job, nil
}

// fileChanges sends on the returned channel each time path is written or replaced (editors save
// by renaming a new file over the old), once it has rested for debounce, until ctx ends. It
// watches the directory, so that a replaced file is still seen.
func fileChanges(ctx context.Context, path string, debounce time.Duration) (<-chan struct{}, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("--watch: %w", err)
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, fmt.Errorf("--watch %s: %w", filepath.Dir(abs), err)
	}
	writes := make(chan struct{})
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) != abs || !ev.Has(fsnotify.Write|fsnotify.Create) {
					continue
				}
				select {
				case writes <- struct{}{}:
				case <-ctx.Done():
					return
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	return debounced(ctx, writes, debounce), nil
}

// debounced sends once events has rested for d after one or more events, until ctx ends: a
// save or a build is several events, and the job should be submitted once, after the last.
func debounced(ctx context.Context, events <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-events:
				if !ok {
					return
				}
				fire = time.After(d)
			case <-fire:
				fire = nil
				select {
				case out <- struct{}{}:
				default: // one is pending already
				}
			}
		}
	}()
	return out
}
