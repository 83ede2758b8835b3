// Package kube is tfjob-tui's side of the cluster: it loads the kubeconfig, checks what the
// cluster serves, watches jobs, replica pods and events, streams logs and port-forwards to
// TensorBoard. Everything it learns reaches the UI as messages on a Feed; it never writes to
// the cluster.
package kube

import "github.com/mlkube/mlkube/operator/api/v1beta1"

// Kinds are the job kinds the dashboard looks for, in display order: the API's table. Every kind
// has the same status type (v1beta1.JobStatus) and labels its replica pods the same way
// (v1beta1.Label*), so the dashboard needs no more than the table to show it. Kinds the cluster
// does not serve are left out (see Served).
var Kinds = v1beta1.Kinds
