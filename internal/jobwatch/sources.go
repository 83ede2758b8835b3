package jobwatch

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A Lister lists and watches one resource in one namespace: a typed client of client-go
// (corev1client.PodInterface, eventsv1client.EventInterface), whose lists are of type L.
type Lister[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// Narrowed is the source of the objects of type typ that l lists, narrowed by narrow (a label or
// field selector).
func Narrowed[L runtime.Object](l Lister[L], typ runtime.Object, narrow func(*metav1.ListOptions)) Source {
	return Source{
		List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return l.List(ctx, o)
		},
		Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return l.Watch(ctx, o)
		},
		Type: typ,
	}
}

// Pods is the source of the replica pods of kind's jobs called name (v1beta1's
// Kind.ReplicaPods), from pods: a namespace's pods, through whatever client the caller chose
// (the dashboard's speaks protobuf). The labels narrow the list, but anyone who may create a
// pod may label it like a job's replica: a pod is one job's only when its controller owner
// reference carries the job's UID, which the handlers check.
func Pods(pods corev1client.PodInterface, kind *v1beta1.Kind, name string) Source {
	selector := kind.ReplicaPods(name).String()
	return Narrowed[*corev1.PodList](pods, &corev1.Pod{}, func(o *metav1.ListOptions) { o.LabelSelector = selector })
}

// Job is the source of kind's job called name in namespace: each job of that name in turn,
// decoded into the kind's Go type (c's scheme must know it).
func Job(c client.WithWatch, kind *v1beta1.Kind, namespace, name string) Source {
	byName := fields.OneTermEqualSelector("metadata.name", name)
	opts := func(o metav1.ListOptions) *client.ListOptions {
		return &client.ListOptions{Namespace: namespace, FieldSelector: byName, Raw: &o}
	}
	return Source{
		List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := kind.NewList()
			if err := c.List(ctx, l, opts(o)); err != nil {
				return nil, err
			}
			return l, nil
		},
		Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, kind.NewList(), opts(o))
		},
		Type: kind.New(),
	}
}
