package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Client watches the cluster for the dashboard and sends what it sees on its Feed. It only
// reads: list, watch and get, plus the log and port-forward subresources.
type Client struct {
	cfg    *rest.Config
	target Target
	kinds  []*v1beta1.Kind
	feed   *Feed

	jobs   map[string]*rest.RESTClient // by kind: their responses decode into rows (jobcodec.go)
	core   corev1client.CoreV1Interface
	events eventsv1client.EventsV1Interface
}

// NewClient makes a client for the served kinds (see Served) that sends on feed.
func NewClient(cfg *rest.Config, target Target, kinds []*v1beta1.Kind, feed *Feed) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "tfjob-tui"
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	jobs := map[string]*rest.RESTClient{}
	for _, k := range kinds {
		if jobs[k.Name], err = jobClient(cfg, hc, k); err != nil {
			return nil, err
		}
	}
	// Pods and events come as protobuf: less to decode and to hold while decoding.
	pb := rest.CopyConfig(cfg)
	pb.ContentType = runtime.ContentTypeProtobuf
	pb.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	core, err := corev1client.NewForConfig(pb)
	if err != nil {
		return nil, err
	}
	events, err := eventsv1client.NewForConfig(pb)
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, target: target, kinds: kinds, feed: feed, jobs: jobs, core: core, events: events}, nil
}

// Target is where the client looks.
func (c *Client) Target() Target { return c.target }

// Kinds are the job kinds the cluster serves.
func (c *Client) Kinds() []*v1beta1.Kind { return c.kinds }

// Next waits for the next batch of messages.
func (c *Client) Next(ctx context.Context) (Batch, bool) { return c.feed.Next(ctx) }

// WatchJobs watches the jobs of every served kind until ctx is done.
func (c *Client) WatchJobs(ctx context.Context) {
	for _, k := range c.kinds {
		rc, ns := c.jobs[k.Name], c.target.Namespace
		req := func(o metav1.ListOptions) *rest.Request {
			return rc.Get().NamespaceIfScoped(ns, ns != "").Resource(k.Plural).VersionedParams(&o, metav1.ParameterCodec)
		}
		c.run(ctx, watchSpec{
			source: k.CRD() + " in " + c.target.Scope(),
			kind:   k.Name,
			need:   Access{Verbs: []string{"list", "watch"}, Resource: k.CRD(), Namespace: c.target.Namespace},
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				l := &JobList{}
				if err := req(o).Do(ctx).Into(l); err != nil {
					return nil, err
				}
				return l, nil
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.Watch = true
				return req(o).Watch(ctx)
			},
			objType:   &Job{},
			transform: jobTransform(k.Name),
			upsert: func(obj any) {
				c.feed.Send(JobUpserted{Job: obj.(*Job)})
			},
			remove: func(obj any) {
				c.feed.Send(JobDeleted{Key: obj.(*Job).Key()})
			},
			synced: func() { c.feed.Send(JobsSynced{Kind: k.Name}) },
		})
	}
}

// WatchJob watches the replica pods of one job, the one whose UID is uid, and the events about
// it until ctx is done. Its messages carry id.
func (c *Client) WatchJob(ctx context.Context, id int, key JobKey, uid types.UID) {
	// An unknown kind selects nothing: no kind labels its pods "".
	kindLabel, container := "", ""
	if k := v1beta1.KindNamed(key.Kind); k != nil {
		kindLabel, container = k.Label(), k.Container
	}
	pods := c.core.Pods(key.Namespace)
	// The labels narrow the list; the replica-type label leaves out the job's TensorBoard pod,
	// which has the other two. But anyone who may create a pod may label it like one of the
	// job's replicas: a pod is the job's only when its controller owner reference carries the
	// job's UID. Another pod is never shown, and one that stops being the job's (its owner
	// reference removed) goes.
	selector := labels.Set{v1beta1.LabelJobName: key.Name, v1beta1.LabelJobKind: kindLabel}.String() + "," + v1beta1.LabelReplicaType
	if k := v1beta1.KindNamed(key.Kind); k != nil {
		selector = k.ReplicaPods(key.Name).String()
	}
	shown := map[string]bool{} // the informer calls its handlers one at a time
	hide := func(r *Replica) {
		if shown[r.Name] {
			delete(shown, r.Name)
			c.feed.Send(ReplicaDeleted{Watch: id, Name: r.Name})
		}
	}
	var podsSynced, eventsSynced atomic.Bool
	synced := func(self, other *atomic.Bool) func() {
		return func() {
			self.Store(true)
			if other.Load() {
				c.feed.Send(ReplicasSynced{Watch: id})
			}
		}
	}
	c.run(ctx, watchSpec{
		id:     id,
		source: "pods of " + key.Kind + " " + key.String(),
		need:   Access{Verbs: []string{"list", "watch"}, Resource: "pods", Namespace: key.Namespace},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
		objType:   &corev1.Pod{},
		transform: replicaTransform(container),
		upsert: func(obj any) {
			r := obj.(*Replica)
			if r.Controller != uid {
				hide(r)
				return
			}
			shown[r.Name] = true
			c.feed.Send(ReplicaUpserted{Watch: id, Replica: r})
		},
		remove: func(obj any) { hide(obj.(*Replica)) },
		synced: synced(&podsSynced, &eventsSynced),
	})

	events := c.events.Events(key.Namespace)
	about := fields.Set{"regarding.kind": key.Kind, "regarding.name": key.Name}.String()
	c.run(ctx, watchSpec{
		id:     id,
		source: "events of " + key.Kind + " " + key.String(),
		need:   Access{Verbs: []string{"list", "watch"}, Resource: "events.events.k8s.io", Namespace: key.Namespace},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = about
			return events.List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = about
			return events.Watch(ctx, o)
		},
		objType:   &eventsv1.Event{},
		transform: eventTransform,
		upsert:    func(obj any) { c.feed.Send(EventUpserted{Watch: id, Event: obj.(*Event)}) },
		remove:    func(obj any) { c.feed.Send(EventDeleted{Watch: id, Name: obj.(*Event).Name}) },
		synced:    synced(&eventsSynced, &podsSynced),
	})
}

type watchSpec struct {
	id        int // the job watch; 0 for the job list
	source    string
	kind      string // the job kind listed; empty for a job's pods and events
	need      Access
	list      func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch     func(context.Context, metav1.ListOptions) (watch.Interface, error)
	objType   runtime.Object
	transform cache.TransformFunc
	upsert    func(row any)
	remove    func(row any)
	synced    func()
}

// run runs an informer for w until ctx is done. Failed lists and watches are reported once
// per failure streak (WatchFailed), and their end too (WatchOK); client-go retries them.
func (c *Client) run(ctx context.Context, w watchSpec) {
	var failing atomic.Bool
	report := func(err error) {
		if err == nil {
			if failing.Swap(false) {
				c.feed.Send(WatchOK{Watch: w.id, Source: w.source})
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		failing.Store(true)
		err = Explain(err, w.need, c.cfg.Host)
		if !errors.Is(err, ErrForbidden) && !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrUnauthorized) {
			err = fmt.Errorf("%s: %w", w.source, err) // the explained ones say what they are about
		}
		c.feed.Send(WatchFailed{Watch: w.id, Source: w.source, Kind: w.kind, Err: err})
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := w.list(ctx, o)
			report(err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := w.watch(ctx, o)
			report(err)
			return wi, err
		},
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    w.objType,
		Transform:     w.transform,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: w.upsert,
			UpdateFunc: func(old, cur any) {
				if o, ok := old.(metav1.Object); ok && o.GetResourceVersion() == cur.(metav1.Object).GetResourceVersion() {
					return
				}
				w.upsert(cur)
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				w.remove(obj)
			},
		},
	})
	go informer.RunWithContext(ctx)
	go func() {
		select {
		case <-informer.HasSyncedChecker().Done():
			w.synced()
		case <-ctx.Done():
		}
	}()
}
