package commands

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// What devctl load cannot load is refused before Docker or the cluster is asked, as a usage
// error (exit 2) that says what to do instead.
func TestLoadRefusesWhatItCannotLoad(t *testing.T) {
	var status bytes.Buffer
	err := Load(context.Background(), LoadOptions{Name: "no-such-cluster", Images: []string{
		"mlkube/trainer:dev", "my-trainer@sha256:" + strings.Repeat("0", 64), "my-trainer:v1",
	}}, &status)
	if ExitCode(err) != ExitUsage {
		t.Fatalf("exit %d (%v), want %d", ExitCode(err), err, ExitUsage)
	}
	for _, want := range []string{
		"mlkube/trainer:dev is devctl's own image (docker.io/mlkube/trainer:dev): devctl up builds it",
		"my-trainer@sha256:0000", "with a tag (my-trainer:v1), not by digest",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "my-trainer:v1 ") || status.Len() != 0 {
		t.Errorf("a loadable image was refused, or something was done: %v; %q", err, status.String())
	}
}
