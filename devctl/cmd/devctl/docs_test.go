package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsWithCommands are the pages whose devctl commands a user copies: each command they show in
// a code block or in backticks, run as written, must name a command devctl has, with flags it
// takes and as many arguments as it wants. (That a command then does what the page says is the
// end-to-end suite's: e2e runs up, run, load, logs, status, suspend, resume and down.)
var docsWithCommands = []string{"README.md", "devctl/README.md", "docs/devctl-run.md", "docs/tui.md", "docs/install.md"}

// devctlCommand is a devctl invocation at the start of a command line (a console's "$ " and the
// commands after a shell's && included): `devctl ...`, `bin/devctl ...` or
// `go run ./devctl/cmd/devctl ...`, up to a shell operator or a comment.
var devctlCommand = regexp.MustCompile(`(?:^|&& )(?:go run \./devctl/cmd/devctl|bin/devctl|devctl) ([a-z][^#|;&]*)`)

func TestDocumentedCommandsParse(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	checked := 0
	for _, doc := range docsWithCommands {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		inBlock := false
		for n, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inBlock = !inBlock
				continue
			}
			// In a code block a line is a command as it stands (after a console's "$ "); a
			// transcript's output lines do not start with devctl. Outside, only what stands in
			// backticks is.
			candidates := []string{strings.TrimPrefix(strings.TrimSpace(line), "$ ")}
			if !inBlock {
				candidates = backticked(line)
			}
			for _, c := range candidates {
				for _, m := range devctlCommand.FindAllStringSubmatch(c, -1) {
					args := strings.Fields(m[1])
					if len(args) == 0 || !looksRunnable(args) {
						continue
					}
					checked++
					if err := parses(args, inBlock); err != nil {
						t.Errorf("%s:%d: devctl %s: %v", doc, n+1, strings.Join(args, " "), err)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d devctl commands found in the docs: the pattern no longer finds them", checked)
	}
}

// backticked lists the spans of line between backticks.
func backticked(line string) []string {
	parts := strings.Split(line, "`")
	var out []string
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// looksRunnable leaves out the synopses of tables and usage lines ([--flag], FILE..., a|b, a
// list of commands such as up/status/down): they are not meant to be run.
func looksRunnable(args []string) bool {
	for _, a := range args {
		if strings.ContainsAny(a, "[]{}<>|'\\") || strings.HasSuffix(a, "...") {
			return false
		}
	}
	return !strings.Contains(args[0], "/")
}

// parses runs devctl's own argument handling on args, and nothing else: the command is found,
// its flags parsed and, for a whole command line, its arguments counted (prose names a command
// and its flags, "devctl run --watch", without the file).
func parses(args []string, whole bool) error {
	r := root()
	r.InitDefaultCompletionCmd() // cobra adds `completion` when it executes
	cmd, rest, err := r.Find(args)
	if err != nil {
		return err
	}
	if cmd == r {
		return nil
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if !whole {
		return nil
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}
