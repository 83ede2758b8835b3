package convert

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ from what Convert gives now")

// TestGolden converts every testdata/*.yaml, one per format and one of values the CRD refuses
// (out-of-range.yaml), and compares what it gives (From, the warnings and the YAML of the job)
// with testdata/<name>.golden. Run with -update to rewrite them after a change, and read the
// diff.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/*.yaml (%v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(data)
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, res)
			golden := strings.TrimSuffix(in, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Convert(%s) gives:\n%s\nwant (%s):\n%s", in, got, golden, want)
			}
			assertCurrent(t, res)
		})
	}
}

// render is what the golden files hold: From, the warnings, then the manifest.
func render(t *testing.T, res *Result) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# from: " + orUnset(res.From) + "\n")
	for _, w := range res.Warnings {
		b.WriteString("# warning: " + w + "\n")
	}
	y, err := YAML(res.Job)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(y)
	return b.Bytes()
}

// assertCurrent checks that what Convert gave is today's API: printed and read again, it
// passes through unchanged, with no warnings.
func assertCurrent(t *testing.T, res *Result) {
	t.Helper()
	y, err := YAML(res.Job)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Convert(y)
	if err != nil {
		t.Fatalf("the converted manifest does not convert again: %v\n%s", err, y)
	}
	if again.From != "" || len(again.Warnings) != 0 {
		t.Errorf("the converted manifest is not taken for today's API: From %q, warnings %q\n%s", again.From, again.Warnings, y)
	}
	y2, err := YAML(again.Job)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(y, y2) {
		t.Errorf("the converted manifest changes when converted again:\n%s\nthen:\n%s", y, y2)
	}
}
