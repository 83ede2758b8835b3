package driver

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestRootResolveStaysInside(t *testing.T) {
	root := Root(layout{
		"/lib":                              "-> usr/lib",
		"/usr/lib/x86_64-linux-gnu/real.so": "",
		"/usr/lib/x86_64-linux-gnu/rel.so":  "-> real.so",
		"/usr/lib/x86_64-linux-gnu/abs.so":  "-> /lib/x86_64-linux-gnu/rel.so",
		"/usr/lib/x86_64-linux-gnu/up.so":   "-> ../../../../../../../usr/lib/x86_64-linux-gnu/real.so",
		"/etc/passwd-link":                  "-> /etc/passwd",
		"/loop/a":                           "-> b",
		"/loop/b":                           "-> a",
	}.write(t))
	for in, want := range map[string]string{
		"/lib/x86_64-linux-gnu/abs.so":              "/usr/lib/x86_64-linux-gnu/real.so",
		"/usr/lib/x86_64-linux-gnu/up.so":           "/usr/lib/x86_64-linux-gnu/real.so",
		"/usr/lib/../lib/./x86_64-linux-gnu/rel.so": "/usr/lib/x86_64-linux-gnu/real.so",
		"/../../lib": "/usr/lib",
		"/":          "/",
	} {
		got, err := root.Resolve(in)
		if err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	// The pod's own /etc/passwd exists; the fake root's does not: the link must not escape.
	if _, err := root.Resolve("/etc/passwd-link"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a link to /etc/passwd resolved outside the root: %v", err)
	}
	if _, err := root.Resolve("/loop/a"); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("loop: %v", err)
	}
	if _, err := root.Resolve("relative"); err == nil {
		t.Error("a relative path resolved")
	}
	if got, err := root.Canonical("/lib/x86_64-linux-gnu/abs.so"); err != nil || got != "/usr/lib/x86_64-linux-gnu/abs.so" {
		t.Errorf("Canonical = %q, %v", got, err)
	}
	if !root.IsFile("/lib/x86_64-linux-gnu/abs.so") || root.IsFile("/lib") || !root.IsDir("/lib") || root.IsFile("/loop/a") {
		t.Error("IsFile/IsDir wrong")
	}
}
