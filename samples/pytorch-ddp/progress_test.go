// Package pytorchddp_test runs the PyTorch sample's Python tests (progress_test.py) under go test:
// progress.py against a local HTTPS server, and train.py's fault settings with torch stood in
// for. They need python3 and openssl, not torch.
package pytorchddp_test

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

func TestProgressPy(t *testing.T) {
	for _, tool := range []string{"python3", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// -B: no __pycache__ in the source tree.
	out, err := exec.CommandContext(ctx, "python3", "-B", "progress_test.py").CombinedOutput()
	if err != nil {
		t.Fatalf("python3 progress_test.py: %v\n%s", err, out)
	}
	t.Logf("python3 progress_test.py:\n%s", out)
}
