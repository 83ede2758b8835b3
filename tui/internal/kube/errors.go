package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Errors a person can act on. Each says what is wrong and what to do; the sentinels let tests
// and callers tell them apart.
var (
	// ErrUnreachable: no answer from the apiserver.
	ErrUnreachable = errors.New("cannot reach the cluster")
	// ErrNotInstalled: the cluster does not serve the job CRDs.
	ErrNotInstalled = errors.New("mlkube is not installed in this cluster")
	// ErrForbidden: RBAC refused a request.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthorized: the apiserver refused the kubeconfig's credentials.
	ErrUnauthorized = errors.New("the cluster refused the kubeconfig's credentials")
)

// Access is one permission: a verb on a resource in a namespace.
type Access struct {
	Verbs     []string // e.g. list, watch
	Resource  string   // e.g. tfjobs.mlkube.io, pods/log
	Namespace string   // empty: all namespaces
}

func (a Access) String() string {
	where := "in namespace " + a.Namespace
	if a.Namespace == "" {
		where = "cluster-wide (all namespaces)"
	}
	return fmt.Sprintf("%s on %s %s", strings.Join(a.Verbs, ", "), a.Resource, where)
}

// Explain turns an API error from a request that needed access into one that says what to
// do. Errors that are not about access or reachability come back as they are.
func Explain(err error, need Access, server string) error {
	if err == nil {
		return nil
	}
	switch {
	case apierrors.IsForbidden(err):
		hint := "ask your cluster admin for a Role granting it"
		if need.Namespace == "" {
			hint = "ask your cluster admin for a ClusterRole granting it, or look at one namespace with -n NAMESPACE"
		}
		return fmt.Errorf("%w: you need %s; %s (%s)", ErrForbidden, need, hint, apiMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w at %s: renew them, or pick another context with --context (%s)", ErrUnauthorized, server, apiMessage(err))
	case isUnreachable(err):
		return unreachable(err, server)
	}
	return err
}

func unreachable(err error, server string) error {
	return fmt.Errorf("%w at %s: %v. Is it running? For the local cluster, `devctl status` tells, and `devctl up` starts it", ErrUnreachable, server, err)
}

// isUnreachable tells errors of the connection (refused, timed out, no route, TLS) from
// errors the apiserver returned.
func isUnreachable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded)
}

func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// notInstalled says the cluster lacks the job CRDs.
func notInstalled(server string) error {
	var res []string
	for _, k := range Kinds {
		res = append(res, k.CRD())
	}
	return fmt.Errorf("%w: %s serves none of %s (the CRDs are missing). "+
		"`devctl up` makes a local cluster with the operator and its CRDs; on another cluster, `make install` installs the CRDs",
		ErrNotInstalled, server, strings.Join(res, ", "))
}
