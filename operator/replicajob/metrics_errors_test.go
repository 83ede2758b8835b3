package replicajob

import (
	"errors"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A reconcile error counts under the apiserver's reason, wrapped or not; any other as Unknown.
func TestCountErrorByReason(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no"))
	before := value(t, reconcileErrors.WithLabelValues("CountErrorKind", "Forbidden"))
	countError("CountErrorKind", fmt.Errorf("creating pod p: %w", forbidden))
	countError("CountErrorKind", errors.New("the network is down"))
	if got := value(t, reconcileErrors.WithLabelValues("CountErrorKind", "Forbidden")) - before; got != 1 {
		t.Errorf("Forbidden counted %v times, want 1", got)
	}
	if got := value(t, reconcileErrors.WithLabelValues("CountErrorKind", "Unknown")); got != 1 {
		t.Errorf("Unknown counted %v times, want 1", got)
	}
}

func value(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
