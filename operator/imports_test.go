package operator_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOperatorStandsAlone holds architecture.md's claim that the operator's code imports none
// of the repository's test kits (internal/) nor the developer tools beside it: what ships in the
// operator's image is operator/ and the modules it names, nothing else of ours. Test files are
// not part of what ships, so go list reads the packages without them.
func TestOperatorStandsAlone(t *testing.T) {
	const module = "github.com/mlkube/mlkube/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Imports}}", module+"operator/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	ours := 0
	for line := range strings.Lines(string(out)) {
		pkg, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(pkg, module) {
			continue
		}
		ours++
		if !strings.HasPrefix(pkg, module+"operator") {
			// Name who brought it in, so the fix is plain.
			t.Errorf("the operator's code depends on %s; importers among ours:%s", pkg, importers(string(out), pkg))
		}
	}
	if ours < 10 {
		t.Fatalf("go list named %d of our packages; the pattern no longer finds the operator", ours)
	}
}

// importers lists the packages of go list's output whose imports include pkg.
func importers(listing, pkg string) string {
	var who []string
	for line := range strings.Lines(listing) {
		name, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		for _, imp := range strings.Fields(strings.Trim(imports, "[]")) {
			if imp == pkg {
				who = append(who, name)
			}
		}
	}
	return " " + strings.Join(who, ", ")
}
