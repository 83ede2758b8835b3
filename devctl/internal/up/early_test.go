package up

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// An applying step after the early apply: it reports what was applied, applies itself when
// there was no early apply, and when the early apply failed says why before applying again.
func TestAfterTheEarlyApply(t *testing.T) {
	for _, tc := range []struct {
		name      string
		early     applied
		wantApply bool
		wantLine  string
	}{
		{"no early apply", applied{}, true, "✓ applied now"},
		{"applied early", applied{line: "Applied 3 created"}, false, "✓ Applied 3 created, while the cluster was created"},
		{"early apply failed", applied{err: errors.New("the apiserver is not ready: EOF")}, true,
			"applying while the cluster was created failed, so applying now: the apiserver is not ready: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			didApply := false
			step := func(ctx context.Context) (string, error) {
				if line, ok := earlyResult(steps.From(ctx), tc.early); ok {
					return line, nil
				}
				didApply = true
				return "applied now", nil
			}
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
