package controlplane

import (
	"errors"
	"os"
	"testing"
)

// Under `go test -fuzz` no control plane starts, in the coordinator or its workers, and callers
// see ErrNoAssets (their envtest tests skip); any other run is not taken for fuzzing.
func TestNoControlPlaneWhileFuzzing(t *testing.T) {
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	for _, tc := range []struct {
		args    []string
		fuzzing bool
	}{
		{[]string{"-test.fuzz=^FuzzX$", "-test.run=^$"}, true},
		{[]string{"-test.fuzz", "FuzzX"}, true},
		{[]string{"--test.fuzz=FuzzX"}, true},
		{[]string{"-test.fuzzworker", "-test.fuzzcachedir=/tmp/x"}, true},
		{[]string{"-test.run=TestX", "-test.v"}, false},
		{[]string{"-test.fuzz="}, false},
		{[]string{"-test.fuzzcachedir=/tmp/x"}, false},
	} {
		os.Args = append([]string{"x.test"}, tc.args...)
		if got := fuzzing(); got != tc.fuzzing {
			t.Errorf("%v: fuzzing %v, want %v", tc.args, got, tc.fuzzing)
		}
		if tc.fuzzing {
			if _, _, err := Start(); !errors.Is(err, ErrNoAssets) {
				t.Errorf("%v: Start gave %v, want ErrNoAssets", tc.args, err)
			}
		}
	}
}
