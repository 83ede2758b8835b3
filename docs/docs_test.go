// Package docs_test holds the facts the documentation quotes to the code that makes them, so that
// a page cannot go on saying what is no longer true: the condition and event reasons it names,
// the event and condition texts it quotes, the help of the programs, the CRDs' messages, and the
// lists of job kinds. Each check reads every user-facing page (userDocs); what a page quotes of
// an earlier design belongs, dated, in a History section, which the checks leave alone.
package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/admission"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// root is the repository, seen from this package's directory.
const root = ".."

// binDir holds the programs the help check builds, for the test binary's life.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mlkube-docs-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// userDocs are the pages people read: the READMEs and docs/.
func userDocs(t *testing.T) []string {
	t.Helper()
	var docs []string
	for _, glob := range []string{"README.md", "docs/*.md", "*/README.md", "operator/chart/README.md", "samples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	slices.Sort(docs)
	docs = slices.Compact(docs)
	if len(docs) < 10 {
		t.Fatalf("only %d pages found: %v", len(docs), docs)
	}
	return docs
}

// A line of a page, and whether it stands in a code block.
type line struct {
	doc   string
	n     int
	text  string
	code  bool
	block int // which code block, counted from 1; 0 outside
}

func (l line) String() string { return fmt.Sprintf("%s:%d", l.doc, l.n) }

// readDoc reads a page of the repository (parse).
func readDoc(t *testing.T, doc string) []line {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	return parse(doc, string(data))
}

// parse splits a page into lines, leaving out its History section (a heading "History" and
// everything under it down to the next heading of its level or higher): history quotes what
// was true then.
func parse(doc, text string) []line {
	var out []line
	code, block, history := false, 0, 0
	for i, s := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(s), "```") {
			code = !code
			if code {
				block++
			}
			continue
		}
		if !code && strings.HasPrefix(s, "#") {
			level := len(s) - len(strings.TrimLeft(s, "#"))
			if history > 0 && level <= history {
				history = 0
			}
			if strings.TrimSpace(strings.TrimLeft(s, "#")) == "History" {
				history = level
			}
		}
		if history > 0 {
			continue
		}
		b := 0
		if code {
			b = block
		}
		out = append(out, line{doc: doc, n: i + 1, text: s, code: code, block: b})
	}
	return out
}

// listItem starts a paragraph of its own.
var listItem = regexp.MustCompile(`^\s*(?:[-*]|\d+\.) `)

// paragraphs joins the prose lines of a paragraph into one, numbered as its first, so that a
// quote a line break cuts in two is read whole. Code lines, table rows and headings stay lines.
func paragraphs(lines []line) []line {
	var out []line
	joining := false
	for _, l := range lines {
		trimmed := strings.TrimSpace(l.text)
		alone := l.code || trimmed == "" || strings.HasPrefix(trimmed, "|") || strings.HasPrefix(trimmed, "#")
		switch {
		case alone:
			out = append(out, l)
			joining = false
		case joining && !listItem.MatchString(l.text) && l.doc == out[len(out)-1].doc:
			out[len(out)-1].text += " " + trimmed
		default:
			out = append(out, l)
			joining = true
		}
	}
	return out
}

// report fails the test on each problem a check found, and when it found fewer than least of
// what it looks for: patterns that no longer find anything would pass every page.
func report(t *testing.T, problems []string, found, least int, what string) {
	t.Helper()
	t.Logf("%d %s checked", found, what)
	for _, p := range problems {
		t.Error(p)
	}
	if found < least {
		t.Errorf("only %d %s found in the pages: the patterns no longer find them", found, what)
	}
}

func allLines(t *testing.T) []line {
	var out []line
	for _, doc := range userDocs(t) {
		out = append(out, readDoc(t, doc)...)
	}
	return out
}

// engineSource parses the engine's Go source (operator/replicajob, tests left out).
func engineSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "operator", "replicajob", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) < 10 {
		t.Fatalf("only %d files of the engine found", len(files))
	}
	return fset, files
}

// ---- (a) reasons ----

// reasonsTheCodeSets collects the condition and event reasons the operator sets, from its Go
// source: string literals in the reason argument of the engine's status helpers, in `reason` and
// `Reason` fields, and assigned to a `reason` variable or a `Reason` field. A reason made by
// joining (titleCase(decider)+"Succeeded", titleCase(kind)+"Invalid") is expanded over what
// can come in front: every kind's replica types, and the kinds of object the engine and the
// frameworks create.
func reasonsTheCodeSets(t *testing.T) map[string]bool {
	t.Helper()
	reasonArg := map[string]int{"setCondition": 3, "fail": 1, "succeed": 1, "endConditions": 1, "failNow": 0, "failedBy": 1}
	reasons := map[string]bool{}
	var suffixes []string
	add := func(e ast.Expr) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
				reasons[s] = true
			}
		case *ast.BinaryExpr:
			if lit, ok := e.Y.(*ast.BasicLit); ok && e.Op == token.ADD {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					suffixes = append(suffixes, s)
				}
			}
		}
	}
	named := func(e ast.Expr, names ...string) bool {
		switch e := e.(type) {
		case *ast.Ident:
			return slices.Contains(names, e.Name)
		case *ast.SelectorExpr:
			return slices.Contains(names, e.Sel.Name)
		}
		return false
	}
	_, files := engineSource(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				for name, i := range reasonArg {
					if named(n.Fun, name) && i < len(n.Args) {
						add(n.Args[i])
					}
				}
			case *ast.KeyValueExpr:
				if named(n.Key, "reason", "Reason") {
					add(n.Value)
				}
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, lhs := range n.Lhs {
						if named(lhs, "reason", "Reason") {
							add(n.Rhs[i])
						}
					}
				}
			}
			return true
		})
	}
	var prefixes []string
	for _, k := range v1beta1.Kinds {
		prefixes = append(prefixes, k.Types...)
	}
	for _, obj := range []any{&corev1.Pod{}, &corev1.Service{}} {
		prefixes = append(prefixes, reflect.TypeOf(obj).Elem().Name())
	}
	for _, fw := range operator.Frameworks {
		if ext, ok := fw.(replicajob.Extension); ok {
			for _, obj := range ext.ExtraTypes() {
				prefixes = append(prefixes, reflect.TypeOf(obj).Elem().Name())
			}
		}
	}
	for _, s := range suffixes {
		for _, p := range prefixes {
			reasons[strings.ToUpper(p[:1])+strings.ToLower(p[1:])+s] = true
		}
	}
	if len(reasons) < 20 || !reasons["ReplicasCreated"] || !reasons["MasterSucceeded"] || !reasons["PodInvalid"] {
		t.Fatalf("the reasons found in operator/replicajob look incomplete: %v", reasons)
	}
	return reasons
}

// passedThrough are reasons that are not the operator's own but reach a job's conditions in the
// words of whoever gave them: the apiserver's status reasons of a refused create (CreateRefused),
// and the kubelet's and the scheduler's waiting reasons (a Waiting job's Running condition).
func passedThrough() map[string]bool {
	out := map[string]bool{}
	for _, r := range []metav1.StatusReason{
		metav1.StatusReasonForbidden, metav1.StatusReasonTooManyRequests, metav1.StatusReasonTimeout,
		metav1.StatusReasonServerTimeout, metav1.StatusReasonUnauthorized, metav1.StatusReasonServiceUnavailable,
		metav1.StatusReasonInternalError, metav1.StatusReasonConflict,
	} {
		out[string(r)] = true
	}
	for r := range v1beta1.ImagePullReasons {
		out[r] = true
	}
	out[corev1.PodReasonUnschedulable] = true
	// Kueue's verdict on a queued job, which the engine shows (operator/kueue gives it).
	for _, r := range replicajob.QueueReasons {
		out[r] = true
	}
	// Waiting reasons of the kubelet's own (pkg/kubelet/images and kuberuntime), as a pod's
	// container status gives them.
	for _, r := range []string{"ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff", "InvalidImageName"} {
		out[r] = true
	}
	// The kubelet's reasons of a terminated container or a failed pod, which status.firstFailure
	// passes on (its reason field, shown as `reason: Error` in YAML).
	for _, r := range []string{"Error", "Evicted"} {
		out[r] = true
	}
	return out
}

var (
	// a table's reason column holds these, in backticks
	backticked = regexp.MustCompile("`([^`]*)`")
	identifier = regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
	// prose: "reason `X`", "reasons `X` and ..."
	reasonInProse = regexp.MustCompile("\\breasons? `([A-Z][A-Za-z]+)`")
	// YAML and kubectl describe: "reason: X", "Reason:    X"
	reasonField = regexp.MustCompile(`^\s*-?\s*[Rr]eason:\s+([A-Z][A-Za-z]+)\s*$`)
	// devctl run: "Restarting=True (RetryableFailure): ..."
	conditionLine = regexp.MustCompile(`\b([A-Z][A-Za-z]+)=(?:True|False) \(([A-Z][A-Za-z]+)\)`)
	// a condition named in a reason column ("the `Running` condition's reason"), not a reason
	conditionNamed = regexp.MustCompile("`[A-Za-z]+` condition")
	// an event in kubectl's and the dashboard's tables: "Normal   Created", "Warning Restarting"
	eventLine = regexp.MustCompile(`\b(?:Normal|Warning) +([A-Z][A-Za-z]+)\b`)
)

// A quoted reason, where it stands.
type quote struct {
	at   line
	text string
}

// reasonsQuoted finds the condition and event reasons the pages quote: in the reason column of
// a table, after "reason" in prose, in YAML and `kubectl describe` output, in devctl run's
// condition lines, in event tables, and in the dashboard's condition table.
func reasonsQuoted(lines []line) []quote {
	condTypes := []string{v1beta1.JobCreated, v1beta1.JobRunning, v1beta1.JobRestarting, v1beta1.JobSucceeded,
		v1beta1.JobFailed, v1beta1.JobSuspended, v1beta1.JobCreateRefused, v1beta1.JobUnreadable}
	conditionRow := regexp.MustCompile(`\b(?:` + strings.Join(condTypes, "|") + `) +(?:True|False) +([A-Z][A-Za-z]+)\b`)
	var out []quote
	reasonCol := -1
	for i, l := range lines {
		if l.code {
			reasonCol = -1
			for _, re := range []*regexp.Regexp{reasonField, eventLine, conditionRow} {
				for _, m := range re.FindAllStringSubmatch(l.text, -1) {
					out = append(out, quote{l, m[1]})
				}
			}
			for _, m := range conditionLine.FindAllStringSubmatch(l.text, -1) {
				if slices.Contains(condTypes, m[1]) {
					out = append(out, quote{l, m[2]})
				}
			}
			continue
		}
		cells := tableCells(l.text)
		if cells == nil {
			reasonCol = -1
			continue
		}
		if i+1 < len(lines) && isSeparator(lines[i+1].text) {
			reasonCol = slices.IndexFunc(cells, func(c string) bool { return strings.EqualFold(c, "reason") })
			continue
		}
		if reasonCol >= 0 && reasonCol < len(cells) && !isSeparator(l.text) {
			for _, m := range backticked.FindAllStringSubmatch(conditionNamed.ReplaceAllString(cells[reasonCol], ""), -1) {
				if identifier.MatchString(m[1]) {
					out = append(out, quote{l, m[1]})
				}
			}
		}
	}
	for _, l := range paragraphs(lines) {
		if l.code {
			continue
		}
		for _, m := range reasonInProse.FindAllStringSubmatch(l.text, -1) {
			out = append(out, quote{l, m[1]})
		}
		for _, m := range conditionLine.FindAllStringSubmatch(l.text, -1) {
			if slices.Contains(condTypes, m[1]) {
				out = append(out, quote{l, m[2]})
			}
		}
	}
	return out
}

func tableCells(s string) []string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "|") || !strings.HasSuffix(s, "|") {
		return nil
	}
	var cells []string
	for _, c := range strings.Split(s[1:len(s)-1], "|") {
		cells = append(cells, strings.TrimSpace(c))
	}
	return cells
}

func isSeparator(s string) bool {
	cells := tableCells(s)
	if cells == nil {
		return false
	}
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

// checkReasons returns a problem for each quoted reason that is neither the operator's nor
// one it passes on, and the reasons it saw.
func checkReasons(lines []line, ours, theirs map[string]bool) (problems []string, seen map[string]bool) {
	seen = map[string]bool{}
	for _, q := range reasonsQuoted(lines) {
		seen[q.text] = true
		if !ours[q.text] && !theirs[q.text] {
			problems = append(problems, fmt.Sprintf("%s: reason %q is not one the operator sets (operator/replicajob) nor one it passes on", q.at, q.text))
		}
	}
	return problems, seen
}

// (a) Every condition or event reason a page quotes is one the operator sets, or one it passes
// on in the apiserver's, the kubelet's or the scheduler's words.
func TestQuotedReasonsAreTheCodes(t *testing.T) {
	problems, seen := checkReasons(allLines(t), reasonsTheCodeSets(t), passedThrough())
	t.Logf("%d reasons quoted", len(seen))
	for _, p := range problems {
		t.Error(p)
	}
	// The pages must still be found to quote what they do: the patterns above finding nothing
	// would pass every page.
	for _, r := range []string{"ReplicasCreated", "RetryableFailure", "BackoffLimitExceeded", "NameClash", "ImagePullBackOff", "Created", "Restarting"} {
		if !seen[r] {
			t.Errorf("no page is found to quote reason %s: the patterns no longer find the reasons quoted", r)
		}
	}
}

// ---- (b) event and condition texts ----

// A createdFormat is one of the texts the engine writes when it has created a job's objects,
// as a pattern of what a page may quote (the counts as numbers or a <placeholder>), and, for
// each verb, the noun count(n, noun) writes there ("" for a plain %d).
type createdFormat struct {
	re    *regexp.Regexp
	nouns []string
}

// createdFormats reads those texts from the engine's source: the Created event ("created %s and
// %s" of count(n, "pod") and count(n, "service")) and the Created condition ("created %d pods
// and their addresses").
func createdFormats(t *testing.T) []createdFormat {
	t.Helper()
	const number = `(\d+|<[a-z]+>)`
	var out []createdFormat
	fset, files := engineSource(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Sprintf" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			format, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.HasPrefix(format, "created %") {
				return true
			}
			// Each verb becomes its argument's pattern: %d a number; %s of count(n, "noun") a
			// number and the noun, with an s or not (checked against the number).
			pattern, args := "^", call.Args[1:]
			var nouns []string
			for i, part := range strings.Split(format, "%") {
				if i == 0 {
					pattern += regexp.QuoteMeta(part)
					continue
				}
				verb, rest := part[:1], part[1:]
				switch verb {
				case "d":
					pattern += number + "()"
					nouns = append(nouns, "")
				case "s":
					c, ok := args[i-1].(*ast.CallExpr)
					if !ok || len(c.Args) != 2 || !isIdent(c.Fun, "count") {
						t.Fatalf("%s: %q: cannot read what %%s stands for", fset.Position(lit.Pos()), format)
					}
					noun, err := strconv.Unquote(c.Args[1].(*ast.BasicLit).Value)
					if err != nil {
						t.Fatal(err)
					}
					pattern += number + " " + regexp.QuoteMeta(noun) + "(s?)"
					nouns = append(nouns, noun)
				default:
					t.Fatalf("%s: %q: verb %%%s not understood", fset.Position(lit.Pos()), format, verb)
				}
				pattern += regexp.QuoteMeta(rest)
			}
			out = append(out, createdFormat{regexp.MustCompile(pattern + "$"), nouns})
			return true
		})
	}
	if len(out) < 2 {
		t.Fatalf("found %d formats of the texts that say what was created (want the event's and the condition's): %v", len(out), out)
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// createdQuote finds, in a page, a text of the kind the engine writes once it created objects:
// "created 5 pods and 1 service", "created <n> pods and their addresses".
var createdQuote = regexp.MustCompile(`\bcreated (?:\d+|<[a-z]+>|every|all) [a-z]+ and [^.;:,)` + "`" + `|]*[a-z]`)

// checkCreated returns a problem for each quoted text of what was created that the engine
// cannot write, and how many such texts it saw.
func checkCreated(lines []line, formats []createdFormat) (problems []string, checked int) {
	for _, l := range paragraphs(lines) {
		for _, q := range createdQuote.FindAllString(l.text, -1) {
			q = strings.TrimSpace(q)
			checked++
			var f createdFormat
			var m []string
			for _, f = range formats {
				if m = f.re.FindStringSubmatch(q); m != nil {
					break
				}
			}
			if m == nil {
				var res []string
				for _, f := range formats {
					res = append(res, f.re.String())
				}
				problems = append(problems, fmt.Sprintf("%s: %q is not a text the engine writes (%s)", l, q, strings.Join(res, ", ")))
				continue
			}
			for i, noun := range f.nouns {
				n, err := strconv.Atoi(m[1+2*i])
				if noun == "" || err != nil {
					continue // a plain number, or a placeholder
				}
				if (n == 1) != (m[2+2*i] == "") {
					problems = append(problems, fmt.Sprintf("%s: %q: count(%d, %q) writes %q", l, q, n, noun, countOf(n, noun)))
				}
				if noun == "service" && n > 1 {
					problems = append(problems, fmt.Sprintf("%s: %q: a job has one headless service (operator/replicajob/services.go); the engine never creates %d for it", l, q, n))
				}
			}
		}
	}
	return problems, checked
}

// countOf is how the engine's count writes n of noun.
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// (b) The pages quote the Created event and the Created condition as the engine writes them: in
// one of its formats, with a noun in the singular exactly when its count is 1, and one service
// at most, since a job has one headless service.
func TestQuotedCreatedTextsAreTheCodes(t *testing.T) {
	problems, checked := checkCreated(allLines(t), createdFormats(t))
	report(t, problems, checked, 5, "texts of what was created")
}

// ---- (c) help ----

var (
	buildOnce sync.Map // program → func() (string, error)
	helpCmd   = regexp.MustCompile(`^\$ (tfjob-tui|mlkube-operator|devctl)((?: [a-z][a-z-]*)*) --help$`)
	helpIntro = regexp.MustCompile("`(tfjob-tui|mlkube-operator|devctl)((?: [a-z][a-z-]*)*) --help` prints:")
)

var packages = map[string]string{
	"tfjob-tui":       "./tui/cmd/tfjob-tui",
	"mlkube-operator": "./operator/cmd/mlkube-operator",
	"devctl":          "./devctl/cmd/devctl",
}

// helpOf builds the program from this checkout (once) and returns what `PROG ARGS --help` prints.
func helpOf(t *testing.T, prog string, args []string) string {
	t.Helper()
	v, _ := buildOnce.LoadOrStore(prog, sync.OnceValues(func() (string, error) {
		bin := filepath.Join(binDir, prog)
		cmd := exec.Command("go", "build", "-o", bin, packages[prog])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", packages[prog], err, out)
		}
		return bin, nil
	}))
	bin, err := v.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", strings.Join(append([]string{prog}, args...), " "), err, out)
	}
	return string(out)
}

// A help a page quotes: the program, its arguments and the quoted lines.
type helpQuote struct {
	at    line
	prog  string
	args  []string
	lines []string
}

// helpQuotes finds the code blocks that quote a program's --help: those that start with
// `$ PROG [COMMAND] --help`, and those right after a line saying "`PROG --help` prints:".
func helpQuotes(lines []line) []helpQuote {
	var out []helpQuote
	var cur *helpQuote
	pending := (*helpQuote)(nil)
	lastBlock := ""
	for _, l := range lines {
		if !l.code {
			cur = nil
			if m := helpIntro.FindStringSubmatch(l.text); m != nil {
				pending = &helpQuote{at: l, prog: m[1], args: strings.Fields(m[2])}
			} else if strings.TrimSpace(l.text) != "" {
				pending = nil
			}
			continue
		}
		if b := fmt.Sprintf("%s#%d", l.doc, l.block); b != lastBlock { // a new block
			lastBlock = b
			cur = nil
			if m := helpCmd.FindStringSubmatch(l.text); m != nil {
				out = append(out, helpQuote{at: l, prog: m[1], args: strings.Fields(m[2])})
				cur = &out[len(out)-1]
				continue
			}
			if pending != nil {
				out = append(out, *pending)
				cur = &out[len(out)-1]
			}
			pending = nil
		}
		if cur != nil {
			cur.lines = append(cur.lines, l.text)
		}
	}
	return out
}

// checkHelp returns a problem for each quoted help that the program does not print, and the
// programs whose help it saw quoted.
func checkHelp(t *testing.T, lines []line) (problems []string, progs map[string]bool) {
	progs = map[string]bool{}
	for _, q := range helpQuotes(lines) {
		progs[q.prog] = true
		real := strings.Split(helpOf(t, q.prog, q.args), "\n")
		for i := range real {
			real[i] = strings.TrimRight(real[i], " ")
		}
		next := 0
		for _, want := range q.lines {
			want = strings.TrimRight(want, " ")
			if want == "" || strings.TrimSpace(want) == "..." {
				continue
			}
			j := slices.Index(real[next:], want)
			if j < 0 {
				problems = append(problems, fmt.Sprintf("%s: %s --help does not print, here or after the lines quoted above it:\n\t%s\nit prints:\n%s",
					q.at, strings.Join(append([]string{q.prog}, q.args...), " "), want, strings.Join(real, "\n")))
				break
			}
			next += j + 1
		}
	}
	return problems, progs
}

// (c) Every help a page quotes is what the program prints today: its lines, in order (a quote
// may leave lines out, as "..."), each as the program prints it.
func TestQuotedHelpIsTheProgramsHelp(t *testing.T) {
	problems, progs := checkHelp(t, allLines(t))
	t.Logf("help quoted of %v", progs)
	for _, p := range problems {
		t.Error(p)
	}
	for _, prog := range []string{"tfjob-tui", "mlkube-operator"} {
		if !progs[prog] {
			t.Errorf("no page is found to quote %s --help: the patterns no longer find it", prog)
		}
	}
}

// ---- (d) kinds ----

// kindWords are the words that name a kind: TfJob, TfJobs, tfjobs, tfjob, tfjobs.mlkube.io.
func kindWords() map[string]*v1beta1.Kind {
	out := map[string]*v1beta1.Kind{}
	for _, k := range v1beta1.Kinds {
		for _, w := range []string{k.Name, k.Name + "s", k.Plural, k.Label(), k.CRD()} {
			out[w] = k
		}
	}
	return out
}

// kindList finds a list of two or more kinds: "TfJob, MXJob and PyTorchJob", "`tfjob`, `mxjob`",
// "`TfJob`s and `MXJob`s",
// "tfjob|mxjob", "a TfJob and an MXJob".
func kindList() *regexp.Regexp {
	var words []string
	for w := range kindWords() {
		words = append(words, regexp.QuoteMeta(w))
	}
	// Longest first, so that tfjobs.mlkube.io is not read as tfjobs.
	slices.SortFunc(words, func(a, b string) int { return len(b) - len(a) })
	item := "(?:an? )?`?(?:" + strings.Join(words, "|") + ")`?s?" // `TfJob`s too
	sep := `(?:,? and |,? or |, |\|)`
	return regexp.MustCompile(`(?:^|[^\w.-])(` + item + `(?:` + sep + item + `)+)(?:[^\w.-]|$)`)
}

// checkKindLists returns a problem for each list of some kinds, and how many lists it saw.
func checkKindLists(lines []line) (problems []string, found int) {
	words := kindWords()
	list := kindList()
	item := regexp.MustCompile("(an? )?`?([A-Za-z.]+)`?")
	for _, l := range paragraphs(lines) {
		for _, m := range list.FindAllStringSubmatch(l.text, -1) {
			found++
			kinds := map[*v1beta1.Kind]bool{}
			articles := 0
			for _, p := range item.FindAllStringSubmatch(m[1], -1) {
				if k := words[p[2]]; k != nil {
					kinds[k] = true
					if p[1] != "" {
						articles++
					}
				}
			}
			if articles == len(kinds) && articles > 0 {
				continue // particular jobs, one of each kind named
			}
			if len(kinds) < len(v1beta1.Kinds) {
				var missing []string
				for _, k := range v1beta1.Kinds {
					if !kinds[k] {
						missing = append(missing, k.Name)
					}
				}
				problems = append(problems, fmt.Sprintf("%s: %q lists some kinds and not %s: name every kind (%s), or say every kind",
					l, m[1], strings.Join(missing, ", "), v1beta1.KindNames("and")))
			}
		}
	}
	return problems, found
}

// (d) Where a page lists job kinds, it lists every kind of the table (v1beta1.Kinds), or says
// "every kind": a list of some of them is one that went stale when a kind was added. A list of
// particular jobs ("a TfJob and an MXJob both named mnist") is no list of kinds. The pages that
// introduce mlkube name every kind.
func TestKindListsNameEveryKind(t *testing.T) {
	problems, found := checkKindLists(allLines(t))
	report(t, problems, found, 10, "lists of kinds")
	for _, doc := range []string{"README.md", "docs/README.md", "operator/chart/README.md"} {
		var text strings.Builder
		for _, l := range readDoc(t, doc) {
			text.WriteString(l.text + "\n")
		}
		for _, k := range v1beta1.Kinds {
			if !regexp.MustCompile(`\b` + k.Name + `s?\b`).MatchString(text.String()) {
				t.Errorf("%s does not name %s: the pages that introduce mlkube name every kind", doc, k.Name)
			}
		}
	}
}

// ---- (e) the CRDs' messages ----

// celMessages are the messages of the CRDs' rules (x-kubernetes-validations), as generated.
func celMessages(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "operator", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) != len(v1beta1.Kinds) {
		t.Fatalf("want a CRD per kind in operator/config/crd/bases, found %v (%v)", files, err)
	}
	out := map[string]bool{}
	for _, k := range v1beta1.Kinds {
		crd, err := config.CRD(k)
		if err != nil {
			t.Fatal(err)
		}
		config.EachRule(crd, func(_ string, r apiextensionsv1.ValidationRule) { out[r.Message] = true })
	}
	if len(out) < 10 {
		t.Fatalf("only %d rule messages in the CRDs", len(out))
	}
	// The admission policy's refusals (operator/admission), which the CRDs no longer hold.
	for _, m := range []string{admission.GroupsMessage, admission.GroupMessage, admission.TensorboardMessage,
		admission.LabelKeyMessage, admission.AnnotationKeyMessage, admission.AnnotationsMessage,
		admission.QuantityMessage, admission.WholeMessage, admission.EqualMessage, admission.QueueMessage} {
		out[m] = true
	}
	for _, k := range v1beta1.Kinds {
		out[admission.RunningMessage(k)] = true
	}
	return out
}

// ruleRefusal is how kubectl shows a refusal by a CRD rule.
var ruleRefusal = regexp.MustCompile(`Invalid value: "(?:object|array|string|integer)": (.*)$`)

// The apiserver's own schema messages, which the validation tables quote beside the CRD's.
var apiserverWords = regexp.MustCompile(`^(Unsupported value|should be|should have|Required value|Duplicate value|Invalid value)`)

// checkRuleMessages returns a problem for each quoted rule message that no CRD has, and how
// many it saw.
func checkRuleMessages(lines []line, messages map[string]bool) (problems []string, checked int) {
	check := func(l line, msg string) {
		checked++
		if !messages[msg] {
			problems = append(problems, fmt.Sprintf("%s: no CRD rule or admission policy refusal has the message %q", l, msg))
		}
	}
	quoted := regexp.MustCompile("^`([^`]*)`$")
	section, msgCol := "", -1
	for i, l := range lines {
		if i > 0 && l.doc != lines[i-1].doc {
			section, msgCol = "", -1
		}
		if l.code {
			if m := ruleRefusal.FindStringSubmatch(strings.TrimSpace(l.text)); m != nil {
				check(l, m[1])
			}
			continue
		}
		if strings.HasPrefix(l.text, "#") {
			section = l.text
		}
		cells := tableCells(l.text)
		if cells == nil {
			msgCol = -1
			continue
		}
		if i+1 < len(lines) && isSeparator(lines[i+1].text) {
			msgCol = -1
			if strings.Contains(section, "Validation") {
				msgCol = slices.IndexFunc(cells, func(c string) bool { return strings.EqualFold(c, "message") })
			}
			continue
		}
		if msgCol >= 0 && msgCol < len(cells) && !isSeparator(l.text) {
			if m := quoted.FindStringSubmatch(cells[msgCol]); m != nil && !apiserverWords.MatchString(m[1]) {
				check(l, m[1])
			}
		}
	}
	return problems, checked
}

// (e) The CRD rules' messages the pages quote, in kubectl's refusals and in the validation
// tables, are the CRDs' messages today.
func TestQuotedRuleMessagesAreTheCRDs(t *testing.T) {
	problems, checked := checkRuleMessages(allLines(t), celMessages(t))
	report(t, problems, checked, 10, "quoted rule messages")
}

// ---- the checks can fail ----

// page reads text as a page of its own.
func page(text string) []line { return parse("stale.md", text) }

// Each check, given a page that says what is not true today, finds it.
func TestChecksCatchStaleQuotes(t *testing.T) {
	ours, theirs := reasonsTheCodeSets(t), passedThrough()
	for _, text := range []string{
		"| type | status | reason | message |\n|---|---|---|---|\n| `Created` | True | `ReplicasMade` | x |",
		"the job fails with reason `ExitCodeError`",
		"```\ntfjob     Restarting=True (RetryLater): pod x\n```",
		"```\n        8s Normal  Spawned    created 5 pods and 1 service\n```",
		"```\n Created    True   AllCreated  created 5 pods and their addresses\n```",
	} {
		if problems, _ := checkReasons(page(text), ours, theirs); len(problems) == 0 {
			t.Errorf("the reasons check misses the invented reason in %q", text)
		}
	}

	formats := createdFormats(t)
	for _, text := range []string{
		"`created 5 pods and 5 services`",
		"```\n  Normal   Created  1s    mlkube-operator  created 1 pods and 1 service\n```",
		" Created    True   ReplicasCreated  created every pod and service",
		"| `Created` | True | `ReplicasCreated` | `created <n> pods and their services` |",
	} {
		if problems, _ := checkCreated(page(text), formats); len(problems) == 0 {
			t.Errorf("the created-text check lets %q through", text)
		}
	}

	for _, text := range []string{
		"```\n$ tfjob-tui --help\n  -w, --watch   watch every job\n```",
		"`mlkube-operator --help` prints:\n\n```\nUsage: mlkube-operator [flags]\n\nRuns the TfJob operator against the cluster of --kubeconfig, $KUBECONFIG,\n```",
	} {
		if problems, _ := checkHelp(t, page(text)); len(problems) == 0 {
			t.Errorf("the help check lets %q through", text)
		}
	}

	for _, text := range []string{
		"| `devctl run FILE` | submit the TfJob or MXJob in FILE and follow it |",
		"| the job list | list, watch | `tfjobs.mlkube.io`, `mxjobs.mlkube.io` |",
		"devctl logs JOB [--kind tfjob|mxjob] [--replica worker-1]",
		"```\ntfjob-tui: a live dashboard of jobs (TfJob and MXJob), read-only.\n```",
	} {
		if problems, _ := checkKindLists(page(text)); len(problems) == 0 {
			t.Errorf("the kinds check lets %q through", text)
		}
	}
	if problems, _ := checkKindLists(page("a TfJob and an MXJob both named `mnist` want `mnist-worker-0`")); len(problems) != 0 {
		t.Errorf("the kinds check takes two particular jobs for a list of kinds: %v", problems)
	}

	messages := celMessages(t)
	for _, text := range []string{
		"```\n* <nil>: Invalid value: \"object\": metadata.name must be at most 48 characters: each replica gets a service named <name>-<type>-<index>, and service names stop at 63\n```",
		"## Validation\n\n| Rule | Reported at | Message |\n|---|---|---|\n| Name characters | `<nil>` | `metadata.name must start with a letter: it prefixes the replica service names` |",
	} {
		if problems, _ := checkRuleMessages(page(text), messages); len(problems) == 0 {
			t.Errorf("the rule-message check lets %q through", text)
		}
	}
}
