package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mlkube/mlkube/internal/jobwatch"
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

// WatchJobs watches the jobs of every served kind until ctx is done. Beside each kind's watch
// it lists the kind's first page (preview), which comes in long before the watch's first list.
func (c *Client) WatchJobs(ctx context.Context) {
	for _, k := range c.kinds {
		rc, ns := c.jobs[k.Name], c.target.Namespace
		req := func(o metav1.ListOptions) *rest.Request {
			return rc.Get().NamespaceIfScoped(ns, ns != "").Resource(k.Plural).VersionedParams(&o, metav1.ParameterCodec)
		}
		go c.preview(ctx, k.Name, req)
		c.run(ctx, watchSpec{
			source: k.CRD() + " in " + c.target.Scope(),
			kind:   k.Name,
			need:   Access{Verbs: []string{"list", "watch"}, Resource: k.CRD(), Namespace: c.target.Namespace},
			src: jobwatch.Source{
				List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					l := &JobList{}
					if err := req(o).Do(ctx).Into(l); err != nil {
						return nil, err
					}
					return l, nil
				},
				Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					o.Watch = true
					return req(o).Watch(ctx)
				},
				Type: &Job{},
			},
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
	// The pods' labels narrow the list, and leave out the job's TensorBoard pod (jobwatch.Pods);
	// a pod is the job's only when its controller owner reference carries the job's UID.
	// Another pod is never shown, and one that stops being the job's (its owner reference
	// removed) goes.
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
	if k := v1beta1.KindNamed(key.Kind); k == nil {
		podsSynced.Store(true) // a kind this build does not know has no replicas it can tell
	} else {
		c.run(ctx, watchSpec{
			id:        id,
			source:    "pods of " + key.Kind + " " + key.String(),
			need:      Access{Verbs: []string{"list", "watch"}, Resource: "pods", Namespace: key.Namespace},
			src:       jobwatch.Pods(c.core.Pods(key.Namespace), k, key.Name),
			transform: replicaTransform,
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
	}

	events := c.events.Events(key.Namespace)
	about := fields.Set{"regarding.kind": key.Kind, "regarding.name": key.Name}.String()
	c.run(ctx, watchSpec{
		id:        id,
		source:    "events of " + key.Kind + " " + key.String(),
		need:      Access{Verbs: []string{"list", "watch"}, Resource: "events.events.k8s.io", Namespace: key.Namespace},
		src:       jobwatch.Narrowed[*eventsv1.EventList](events, &eventsv1.Event{}, func(o *metav1.ListOptions) { o.FieldSelector = about }),
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
	src       jobwatch.Source
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
	jobwatch.Informer{
		Source: w.src, Transform: w.transform, Upsert: w.upsert, Remove: w.remove, Synced: w.synced, Report: report,
	}.Run(ctx)
}
