package v1beta1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// kindsMayBeNamedIn are the places besides tests and generated files where Go source may spell
// out a kind: its API file and its framework package (per kind, below), the line that registers
// the frameworks, the converter, whose tables describe the older APIs (their kinds and fields
// are facts about those APIs, which happen to share today's names), and the samples, which are
// what a user writes (a user's trainer names its framework).
var kindsMayBeNamedIn = []string{
	"operator/operator.go",
	"devctl/internal/convert/",
	"samples/",
}

// The table of kinds (v1beta1.Kinds) is the only place kinds are listed: Go source elsewhere
// never spells a kind's name, resource, label, type or port field or container as a string of
// its own (code keyed on one kind belongs in that kind's files), nor lists two kinds in one
// string (a list that goes stale when a kind is added: v1beta1.KindNames makes one).
func TestKindsAreListedOnce(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	owned := map[string]*v1beta1.Kind{} // a word of a kind → the kind
	for _, k := range v1beta1.Kinds {
		for _, w := range []string{k.Name, k.Plural, k.Label(), k.TypeField, k.PortField, k.Container} {
			if w != "port" { // a word of every kind's, and of everyone's
				owned[w] = k
			}
		}
	}
	var names []string
	for _, k := range v1beta1.Kinds {
		names = append(names, regexp.QuoteMeta(k.Name))
	}
	kindWord := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)

	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "bin" || rel == "e2e" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		for _, allowed := range kindsMayBeNamedIn {
			if rel == allowed || strings.HasPrefix(rel, allowed) {
				return nil
			}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if k, ok := owned[s]; ok && !kindsOwn(k, rel) {
				t.Errorf("%s: %q names the kind %s: take it from v1beta1.Kinds (or move the code to %s's files)", fset.Position(lit.Pos()), s, k.Name, k.Name)
			}
			if found := kindWord.FindAllString(s, -1); len(distinct(found)) > 1 {
				t.Errorf("%s: a string lists the kinds %v: make the list from v1beta1.Kinds (v1beta1.KindNames)", fset.Position(lit.Pos()), distinct(found))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files: the walk missed the source", checked)
	}
}

// kindsOwn says whether the file at rel is one of k's own: its API file or its framework package.
func kindsOwn(k *v1beta1.Kind, rel string) bool {
	return rel == "operator/api/v1beta1/"+k.Label()+"_types.go" || strings.HasPrefix(rel, "operator/"+k.Label()+"/")
}

func distinct(words []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range words {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
