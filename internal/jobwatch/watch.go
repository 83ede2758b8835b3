// Package jobwatch is how devctl and the dashboard follow a job, written once: the informer that
// keeps a list-and-watch up (Informer), what a job and its replica pods are listed and watched by
// (Job, Pods), which container decides a replica (Container), the log streamer (logs.go), and
// a job's progress in words (progress.go).
// devctl's follow and tfjob-tui's client differ in what they make of what they see, not in how
// they see it.
package jobwatch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// A Source is what one informer lists and watches: objects of Type.
type Source struct {
	List  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	Type  runtime.Object
}

// An Informer keeps a Source's objects and hands each change to its handlers.
type Informer struct {
	Source
	// Transform turns each object into what is kept and handed over (the dashboard keeps rows,
	// not pods); nil keeps the objects. It must accept its own output: client-go may pass an
	// object it already holds through again.
	Transform cache.TransformFunc
	// Upsert takes each object added or changed; Remove each one deleted, as last seen.
	Upsert, Remove func(obj any)
	// Synced, when set, is called once every object of the first list has been handed over.
	Synced func()
	// Report, when set, takes the outcome of each list and watch: nil when it worked.
	// client-go retries a failed one by itself; Report is for saying so.
	Report func(error)
}

// Run runs the informer until ctx is done. The handlers are called one at a time.
func (in Informer) Run(ctx context.Context) {
	report := in.Report
	if report == nil {
		report = func(error) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := in.List(ctx, o)
			report(err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := in.Watch(ctx, o)
			report(err)
			return w, err
		},
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    in.Type,
		Transform:     in.Transform,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: in.Upsert,
			UpdateFunc: func(old, cur any) {
				// A relist hands over every object again; one that has not changed is no news.
				if o, ok := old.(metav1.Object); ok && o.GetResourceVersion() == cur.(metav1.Object).GetResourceVersion() {
					return
				}
				in.Upsert(cur)
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				in.Remove(obj)
			},
		},
	})
	go informer.RunWithContext(ctx)
	if in.Synced != nil {
		go func() {
			select {
			case <-informer.HasSyncedChecker().Done():
				in.Synced()
			case <-ctx.Done():
			}
		}()
	}
}
