package replicajob_test

import (
	"testing"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
)

// Every registered kind on the engine's shared behaviour (internal/jobtest.Conformance): its kit
// comes from the table of kinds alone, so a new kind runs it with no test code of its own.
func TestConformance(t *testing.T) {
	for _, fw := range operator.Frameworks {
		t.Run(fw.Kind().Name, func(t *testing.T) { jobtest.Conformance(t, jobtest.KindOf(fw)) })
	}
}
