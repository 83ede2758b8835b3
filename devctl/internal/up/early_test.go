package up

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// An applying step after the early apply: it reports what was applied, applies itself when
// there was no early apply, and when the early apply failed says why before applying again.
func TestUnlessEarly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		early     *earlyApply
		wantApply bool
		wantLine  string
	}{
		{"existing cluster", nil, true, "✓ applied now"},
		{"no early load", &earlyApply{}, true, "✓ applied now"},
		{"applied early", &earlyApply{operator: steps.Done("Applied 3 created")}, false, "✓ Applied 3 created, while the cluster was created"},
		{"early apply failed", &earlyApply{operator: errors.New("the apiserver is not ready: EOF")}, true,
			"applying while the cluster was created failed, so applying now: the apiserver is not ready: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &up{kube: &cluster.Clients{}}
			if tc.early != nil {
				u.early = &early{apply: tc.early}
			}
			applied := false
			step := u.unlessEarly(func(a *earlyApply) error { return a.operator }, func(context.Context, *cluster.Clients) error {
				applied = true
				return steps.Done("applied now")
			})
			var out bytes.Buffer
			if err := (&steps.Runner{Out: &out}).Run(context.Background(), steps.Step{Name: "Applying", Run: step}); err != nil {
				t.Fatal(err)
			}
			if applied != tc.wantApply {
				t.Errorf("applied %t, want %t", applied, tc.wantApply)
			}
			if !strings.Contains(out.String(), tc.wantLine) {
				t.Errorf("output lacks %q:\n%s", tc.wantLine, out.String())
			}
		})
	}
}
