package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
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
		for _, r := range shared() {
			text := r.Rule
			if r == SetByTheOperator {
				text = r.Message // "false" is in any Go file
			}
			if bytes.Contains(data, []byte(text)) {
				t.Errorf("%s restates the shared rule %s: hack/crdrules writes it into every CRD", f, r.Rule)
			}
		}
	}
	for _, k := range v1beta1.Kinds {
		crd, err := config.CRD(k)
		if err != nil {
			t.Fatal(err)
		}
		f := config.CRDFile(k)
		count := map[string]int{}
		config.EachRule(crd, func(_ string, r apiextensionsv1.ValidationRule) { count[r.Rule]++ })
		want := map[string]int{ContainerRule(k).Rule: 1, SetByTheOperator.Rule: 2} // hostname and subdomain
		for _, r := range NameRules {
			want[r.Rule] = 1
		}
		for rule, n := range want {
			if count[rule] != n*len(crd.Spec.Versions) {
				t.Errorf("%s holds the rule %s %d times, want %d a version", f, rule, count[rule], n)
			}
		}
		for _, other := range v1beta1.Kinds {
			if other != k && count[ContainerRule(other).Rule] != 0 {
				t.Errorf("%s holds %s's container rule", f, other.Name)
			}
		}
	}
}

// shared is every rule this program writes, for any kind.
func shared() []Rule {
	rules := slices.Concat(NameRules, []Rule{SetByTheOperator})
	for _, k := range v1beta1.Kinds {
		rules = append(rules, ContainerRule(k))
	}
	return rules
}
