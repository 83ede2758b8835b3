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

// The shared rules are stated here once (docs/architecture.md): no API file restates one as a
// marker, and each CRD holds each rule once.
func TestSharedRulesAreStatedOnce(t *testing.T) {
	sources, err := filepath.Glob("../../operator/api/v1beta1/*.go")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no API files: %v", err)
	}
	for _, f := range sources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range NameRules {
			if bytes.Contains(data, []byte(r.Rule)) {
				t.Errorf("%s restates the shared rule %s: hack/crdrules writes it into every CRD", f, r.Rule)
			}
		}
	}
	crds, _ := filepath.Glob("../../operator/config/crd/bases/*.yaml")
	for _, f := range crds {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range NameRules {
			if n := bytes.Count(data, []byte("rule: "+r.Rule)); n != 1 {
				t.Errorf("%s holds the rule %s %d times, want once", f, r.Rule, n)
			}
		}
	}
}
