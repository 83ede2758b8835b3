package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed CRDs carry the shared rules as this program writes them: running it again
// changes nothing (`make check-generated` holds the rest).
func TestCommittedCRDsHaveTheRules(t *testing.T) {
	files, err := filepath.Glob("../../operator/config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := transform(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(out, data) {
			t.Errorf("%s: crdrules would change it: run make generate", f)
		}
		for _, r := range NameRules {
			if !bytes.Contains(data, []byte(r.Rule)) {
				t.Errorf("%s: no rule %s", f, r.Rule)
			}
		}
	}
}
