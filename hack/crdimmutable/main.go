// Command crdimmutable writes the CEL rules that keep each job's replica groups as they were
// created, but for what a queueing system changes while the job is suspended: `make generate`
// runs it on operator/config/crd/bases after controller-gen. Kueue admits a suspended job by
// setting its pod templates' labels, annotations, nodeSelector, tolerations and schedulingGates
// in the update that resumes it, and puts them back in the one that suspends it again, as
// Kubernetes Jobs allow ("mutable scheduling directives"). Everything else of a group stays
// immutable whether the job is suspended or not: its running replicas were told the cluster's
// shape, and the pods it creates again must be the ones it was created with.
//
// The rules compare every property of the schema but those, so that a field Kubernetes adds to
// the pod spec is covered by the next `make generate` without a word here. Whether the job is
// running (where nothing of replicaSpecs may change) is each kind's own rule, on its spec.
// It also defaults to {} what the Go types always write and a manifest leaves out (defaults.go),
// so that a Go client's update of a job it read is no change.
//
//	go run ./hack/crdimmutable FILE...
package main

import (
	"fmt"
	"strings"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
)

func main() {
	crdfile.Main("crdimmutable", func(data []byte) ([]byte, string, error) {
		out, r, err := immutableCRD(data)
		if err != nil {
			return nil, "", err
		}
		return out, fmt.Sprintf("a replica group's %d properties compared in %d rules of estimated cost %v (at most %d each), %d left mutable while suspended; default {} for %s",
			len(r.compared), len(r.rules), r.costs, r.budget, len(r.mutable), strings.Join(r.defaulted, ", ")), nil
	})
}
