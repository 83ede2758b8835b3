package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A start that fails after etcd and the apiserver are up (here: a CRD the apiserver refuses)
// stops them again: the caller gets no environment to stop, so they would outlive the test.
func TestFailedStartLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	bad := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: bads.example.com}
spec:
  group: example.com
  names: {kind: Bad, plural: bads}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations: [{rule: "self.nosuchfield =="}]
`
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Start(func(e *envtest.Environment) { e.CRDDirectoryPaths = []string{dir} })
	if errors.Is(err, ErrNoAssets) {
		t.Skip(err)
	}
	if err == nil || !strings.Contains(err.Error(), "bads.example.com") {
		t.Fatalf("Start with a CRD the apiserver refuses gave %v, want an error naming the CRD", err)
	}
	if left := children("kube-apiserver", "etcd"); len(left) > 0 {
		t.Errorf("still running after the failed start: %v", left)
	}
}

// children lists this process's child processes with one of the given names.
func children(names ...string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		fields := strings.Fields(s[end+2:])
		// A stopped child lingers as a zombie until reaped; it no longer runs.
		if fields[0] == "Z" || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		for _, n := range names {
			if s[open+1:end] == n {
				out = append(out, fmt.Sprintf("%s (pid %d)", n, pid))
			}
		}
	}
	return out
}
