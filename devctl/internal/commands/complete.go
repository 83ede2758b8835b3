package commands

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// JobNames are the names of the jobs in namespace (the context's when empty) that start with
// prefix, of kind when it is set, else of every kind the cluster serves: what a shell completes
// JOB with. Completion must stay quiet, so a cluster that does not answer gives none.
func JobNames(ctx context.Context, namespace, kind, prefix string) []string {
	cl, err := connectCurrent(ctx)
	if err != nil {
		return nil
	}
	if namespace == "" {
		namespace = cl.Namespace
	}
	var names []string
	for _, k := range v1beta1.Kinds {
		if kind != "" && !strings.EqualFold(kind, k.Label()) && !strings.EqualFold(kind, k.Name) {
			continue
		}
		if cl.serves(k) != nil {
			continue
		}
		list := k.NewList()
		if err := cl.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if m, ok := o.(metav1.Object); ok && strings.HasPrefix(m.GetName(), prefix) && !slices.Contains(names, m.GetName()) {
				names = append(names, m.GetName())
			}
			return nil
		})
	}
	slices.Sort(names)
	return names
}
