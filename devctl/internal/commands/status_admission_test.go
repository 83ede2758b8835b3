package commands

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/admission"
)

// devctl status says whether the admission policy holds, and what a cluster without its binding
// loses. Not parallel: it takes the binding away for a moment.
func TestStatusSaysWhetherTheAdmissionPolicyHolds(t *testing.T) {
	envtest(t)
	scheme, err := cluster.Scheme()
	must(t, err)
	c, err := client.New(jobtest.Config, client.Options{Scheme: scheme})
	must(t, err)
	kube := &cluster.Clients{Client: c}
	if line := admissionLine(context.Background(), kube); !strings.HasPrefix(line, "policy "+admission.Name+" enforced:") {
		t.Errorf("with the policy bound: %q", line)
	}
	jobtest.WithoutAdmissionPolicy(t)
	if line := admissionLine(context.Background(), kube); !strings.Contains(line, "installed but not bound: nothing stops a change to a running job's groups") {
		t.Errorf("without its binding: %q", line)
	}
}
