//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// README's "Your own trainer" runs as written: each line of its code blocks, from the checkout,
// against the suite's cluster (the current context), one after the other; every one must
// succeed, and `devctl run` succeeds only when its job does.
func readmeYourOwnTrainer(t *testing.T) {
	root, err := filepath.Abs("..")
	must(t, err)
	lines := readmeSection(t, filepath.Join(root, "README.md"), "### Your own trainer")
	if len(lines) < 4 {
		t.Fatalf("README's \"Your own trainer\" shows %d commands: %q", len(lines), lines)
	}
	c, _ := clusterClient(t)
	t.Cleanup(func() {
		for _, name := range []string{"my-trainer", "my-trainer-from-registry"} {
			_ = c.Delete(context.Background(), &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})
		}
		os.Remove(filepath.Join(root, "samples", "own-trainer", "trainer"))
	})
	for _, line := range lines {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "TERM=dumb")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("$ %s  (%.1fs, err=%v)\n%s", line, time.Since(start).Seconds(), err, out)
		if err != nil {
			t.Fatalf("README's command failed: %s", line)
		}
	}
}

// readmeSection returns the commands of the code blocks under heading, up to the next heading:
// each line, its comment left out.
func readmeSection(t *testing.T, path, heading string) []string {
	data, err := os.ReadFile(path)
	must(t, err)
	text := string(data)
	start := strings.Index(text, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no heading %q", path, heading)
	}
	text = text[start+len(heading)+2:]
	if end := strings.Index(text, "\n#"); end >= 0 {
		text = text[:end]
	}
	var lines []string
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if command, _, _ := strings.Cut(line, " #"); inBlock && strings.TrimSpace(command) != "" {
			lines = append(lines, strings.TrimSpace(command))
		}
	}
	return lines
}
