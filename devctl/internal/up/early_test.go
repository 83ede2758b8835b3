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
		{"applied early", &earlyApply{operator: applied{line: "Applied 3 created"}}, false, "✓ Applied 3 created, while the cluster was created"},
		{"early apply failed", &earlyApply{operator: applied{err: errors.New("the apiserver is not ready: EOF")}}, true,
			"applying while the cluster was created failed, so applying now: the apiserver is not ready: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &up{kube: &cluster.Clients{}}
			if tc.early != nil {
				u.early = &early{apply: tc.early}
			}
			didApply := false
			step := u.unlessEarly(func(a *earlyApply) applied { return a.operator }, func(context.Context, *cluster.Clients) (string, error) {
				didApply = true
				return "applied now", nil
			})
			var out bytes.Buffer
			if err := (&steps.Runner{Out: &out}).Run(context.Background(), steps.Step{Name: "Applying", Run: step}); err != nil {
				t.Fatal(err)
			}
			if didApply != tc.wantApply {
				t.Errorf("applied %t, want %t", didApply, tc.wantApply)
			}
			if !strings.Contains(out.String(), tc.wantLine) {
				t.Errorf("output lacks %q:\n%s", tc.wantLine, out.String())
			}
		})
	}
}
