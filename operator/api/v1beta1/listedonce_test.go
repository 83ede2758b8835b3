package v1beta1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// kindsMayBeNamedIn are the files besides tests and generated files where Go source may name a
// kind in a string, or list kinds in one, each for the reason it gives. A kind's own files (its
// API file and framework package, kindsOwn) may name it too. An allowance no string of its file
// needs any more fails the test: the list stays as short as the source lets it be.
var kindsMayBeNamedIn = map[string]string{
	// The converter's tables describe the older APIs, one entry per kind: their kinds and
	// fields (Kubeflow's TFJob, tfReplicaSpecs, tfjob-port) are facts about those APIs, which
	// happen to share today's names.
	"devctl/internal/convert/kinds.go": "the converter's table of the older APIs",
	// What the converter reads, for devctl convert --help, beside that table: it names each
	// kind's older forms, which no table of today's kinds holds.
	"devctl/internal/convert/reads.go": "the older forms of each kind, for devctl convert --help",
	// The sample trainer is what a user writes and ships in an image of its own: it imports
	// nothing of mlkube's, and speaks each framework's protocol (TF_CONFIG, DMLC_*, the PyTorch
	// and JAX variables), which its help and its missing-TF_CONFIG error explain by the kind
	// that sets them.
	"samples/trainer/main.go":     "the sample trainer's help, a user's program",
	"samples/trainer/tfconfig.go": "the sample trainer's error naming each kind's variables, a user's program",
}

// The table of kinds (v1beta1.Kinds) is the only place kinds are listed: Go source elsewhere
// never spells a kind's name, resource, label, type or port field or container as a string of
// its own, in any case (code keyed on one kind belongs in that kind's files), nor names two
// kinds in one string or one concatenation of strings, in any case or form ("tfjob, mxjob",
// "TfJobs and MXJobs": a list that goes stale when a kind is added; v1beta1.KindNames and
// v1beta1.Labels make one).
func TestKindsAreListedOnce(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	owned := map[string]*v1beta1.Kind{} // a word of a kind, in lower case → the kind
	for _, k := range v1beta1.Kinds {
		for _, w := range []string{k.Name, k.Plural, k.Label(), k.TypeField, k.PortField, k.Container} {
			if w != "port" { // a word of every kind's, and of everyone's
				owned[strings.ToLower(w)] = k
			}
		}
	}
	checked := 0
	used := map[string]bool{} // allowed files that named a kind
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
		_, allowed := kindsMayBeNamedIn[rel]
		report := func(pos token.Pos, format string, args ...any) {
			if allowed {
				used[rel] = true
				return
			}
			t.Errorf("%s: "+format, append([]any{fset.Position(pos)}, args...)...)
		}
		forEachString(f, func(lits []*ast.BasicLit, values []string) {
			for i, s := range values {
				if k, ok := owned[strings.ToLower(s)]; ok && !kindsOwn(k, rel) {
					report(lits[i].Pos(), "%q names the kind %s: take it from v1beta1.Kinds (or move the code to %s's files)", s, k.Name, k.Name)
				}
			}
			if named := kindsNamed(strings.Join(values, " ")); len(named) > 1 {
				report(lits[0].Pos(), "a string names the kinds %s: make the list from v1beta1.Kinds (v1beta1.KindNames, v1beta1.Labels)", strings.Join(named, ", "))
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files: the walk missed the source", checked)
	}
	for rel, why := range kindsMayBeNamedIn {
		if !used[rel] {
			t.Errorf("kindsMayBeNamedIn allows %s (%s), but no string there names a kind: remove the allowance", rel, why)
		}
	}
}

// A string that names two kinds fails, in any case and in a concatenation; one that names a
// single kind, or sample files of several, passes.
func TestKindsNamed(t *testing.T) {
	if len(v1beta1.Kinds) < 2 {
		t.Skip("one kind: nothing to list")
	}
	a, b := v1beta1.Kinds[0], v1beta1.Kinds[1]
	for s, want := range map[string]int{
		a.Label() + ", " + b.Label():                                       2,
		strings.ToUpper(a.Name) + " and " + b.Plural:                       2,
		"a " + a.Name + " (" + a.Ref("x") + ")":                            1,
		a.Name + "s run here":                                              1,
		"samples/" + a.Label() + "-x.yaml samples/" + b.Label() + "-y.yml": 0,
		"not" + a.Label() + " " + b.Label() + "s2":                         0,
	} {
		if got := kindsNamed(s); len(got) != want {
			t.Errorf("kindsNamed(%q) = %v, want %d kinds", s, got, want)
		}
	}
}

var (
	// kindWord matches a kind's name, label or plural, in any case, as a word.
	kindWord = func() *regexp.Regexp {
		var words []string
		for _, k := range v1beta1.Kinds {
			words = append(words, regexp.QuoteMeta(k.Plural), regexp.QuoteMeta(k.Label()))
		}
		return regexp.MustCompile(`(?i)\b(` + strings.Join(words, "|") + `)\b`)
	}()
	// yamlPath is a path to a YAML file: it names a file (a sample of one kind), not a kind.
	yamlPath = regexp.MustCompile(`[\w./-]*\.ya?ml\b`)
)

// kindsNamed are the kinds s names, each once, in the order it names them.
func kindsNamed(s string) []string {
	var out []string
	for _, w := range kindWord.FindAllString(yamlPath.ReplaceAllString(s, " "), -1) {
		if k := v1beta1.KindNamed(w); k != nil && !slices.Contains(out, k.Name) {
			out = append(out, k.Name)
		}
	}
	return out
}

// forEachString calls visit with each string of f: a literal, or the literals of one
// concatenation ("a" + x + "b"), which say one thing together.
func forEachString(f *ast.File, visit func(lits []*ast.BasicLit, values []string)) {
	var inspect func(n ast.Node) bool
	inspect = func(n ast.Node) bool {
		var lits []*ast.BasicLit
		var values []string
		var others []ast.Expr
		var flatten func(e ast.Expr)
		flatten = func(e ast.Expr) {
			switch e := e.(type) {
			case *ast.BinaryExpr:
				if e.Op == token.ADD {
					flatten(e.X)
					flatten(e.Y)
					return
				}
			case *ast.ParenExpr:
				flatten(e.X)
				return
			case *ast.BasicLit:
				if e.Kind == token.STRING {
					if s, err := strconv.Unquote(e.Value); err == nil {
						lits, values = append(lits, e), append(values, s)
					}
					return
				}
			}
			others = append(others, e)
		}
		switch e := n.(type) {
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return true
			}
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return true
			}
		default:
			return true
		}
		flatten(n.(ast.Expr))
		if len(lits) > 0 {
			visit(lits, values)
		}
		for _, o := range others {
			ast.Inspect(o, inspect)
		}
		return false
	}
	ast.Inspect(f, inspect)
}

// kindsOwn says whether the file at rel is one of k's own: its API file or its framework package.
func kindsOwn(k *v1beta1.Kind, rel string) bool {
	return rel == "operator/api/v1beta1/"+k.Label()+"_types.go" || strings.HasPrefix(rel, "operator/"+k.Label()+"/")
}
