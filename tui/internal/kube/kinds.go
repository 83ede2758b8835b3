// Package kube is tfjob-tui's side of the cluster: it loads the kubeconfig, checks what the
// cluster serves, watches jobs, replica pods and events, streams logs and port-forwards to
// TensorBoard. Everything it learns reaches the UI as messages on a Feed; it never writes to
// the cluster.
package kube

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Group and Version of every job kind the dashboard shows.
const (
	Group   = "mlkube.io"
	Version = "v1beta1"
)

// Kind is one job kind of the replica-job engine. Every kind has the same status type
// (v1beta1.JobStatus) and labels its replica pods the same way, so the dashboard needs no more
// than this to show it.
type Kind struct {
	Kind      string // TfJob
	Resource  string // tfjobs
	Container string // the container whose exit code decides a replica: its logs are shown first
}

// Kinds are the job kinds the dashboard looks for, in display order: every kind of the API's
// table (v1beta1.Kinds). Kinds the cluster does not serve are left out (see Served).
var Kinds = func() []Kind {
	var out []Kind
	for _, k := range v1beta1.Kinds {
		out = append(out, Kind{Kind: k.Name, Resource: k.Plural, Container: k.Container})
	}
	return out
}()

// Label is the value of the mlkube.io/job-kind label on the kind's pods: its name in lower case.
func (k Kind) Label() string { return strings.ToLower(k.Kind) }

// GVR is the kind's resource.
func (k Kind) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: k.Resource}
}

// Labels the operator puts on every replica pod.
const (
	LabelJobName      = v1beta1.LabelJobName
	LabelJobKind      = v1beta1.LabelJobKind
	LabelReplicaType  = v1beta1.LabelReplicaType
	LabelReplicaIndex = v1beta1.LabelReplicaIndex
)

// KindNamed finds a kind by its name.
func KindNamed(kinds []Kind, name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Kind == name {
			return k, true
		}
	}
	return Kind{}, false
}
