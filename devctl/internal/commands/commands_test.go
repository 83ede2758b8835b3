package commands

import (
	"k8s.io/apimachinery/pkg/runtime"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlkube/mlkube/devctl/internal/images"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestClusterConfigFallsBackToTheBuiltIn(t *testing.T) {
	root := t.TempDir()
	data, from, err := clusterConfig(root, "", "builtin")
	if err != nil || string(data) != "builtin" || from != "built-in single-node config" {
		t.Errorf("no clusters/kind.yaml: %q from %q, %v", data, from, err)
	}

	if err := os.MkdirAll(filepath.Join(root, "clusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "clusters", "kind.yaml"), []byte("repo"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, from, err = clusterConfig(root, "", "builtin")
	if err != nil || string(data) != "repo" || from != "clusters/kind.yaml" {
		t.Errorf("with clusters/kind.yaml: %q from %q, %v", data, from, err)
	}

	if _, _, err := clusterConfig(root, filepath.Join(root, "nothere.yaml"), "builtin"); err == nil {
		t.Error("a --config file that does not exist was accepted")
	}
}

func TestRepoRootFindsTheModule(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "operator", "config", "default", "kustomization.yaml")); err != nil {
		t.Errorf("repoRoot %s is not the mlkube checkout: %v", root, err)
	}
}

func TestCountStates(t *testing.T) {
	// Any kind: the states are read through v1beta1.Job.
	job := func(s v1beta1.JobState) runtime.Object {
		var j v1beta1.PyTorchJob
		j.Status.State = s
		return &j
	}
	suspended := job(v1beta1.JobStateRunning).(*v1beta1.PyTorchJob)
	suspended.Status.Phase = v1beta1.JobPhaseSuspended
	// Unreadable: whatever its status says, nothing acts on it.
	var unreadable v1beta1.PyTorchJob
	if err := unreadable.UnmarshalJSON([]byte(`{"spec":{"runPolicy":{"ttlSecondsAfterFinished":2592000000}},"status":{"state":"Running"}}`)); err != nil || unreadable.Unreadable() == "" {
		t.Fatalf("no unreadable job to count: %v", err)
	}
	got := countStates([]runtime.Object{
		job(v1beta1.JobStateFailed), &unreadable, job(v1beta1.JobStateRunning), job(""), suspended, job(v1beta1.JobStateRunning), job(v1beta1.JobStateSucceeded),
	})
	if want := "1 New, 2 Running, 1 Suspended, 1 Succeeded, 1 Failed, 1 Unreadable"; got != want {
		t.Errorf("countStates = %q, want %q", got, want)
	}
	if got := countStates(nil); got != "none" {
		t.Errorf("countStates of none = %q", got)
	}
}

func TestLoadedAndAliased(t *testing.T) {
	b, err := images.Assemble(images.Image{Name: "mlkube/trainer", Binary: "trainer"}, []byte("binary"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	// The node spells our images with the default registry in front.
	repo := b.Ref.Context().Name()
	tag, dev := repo+":"+b.Ref.TagStr(), repo+":dev"
	for _, tc := range []struct {
		name string
		have map[string]string
		want bool
	}{
		{"both tags, one image", map[string]string{tag: "sha256:a", dev: "sha256:a"}, true},
		{":dev names an older build", map[string]string{tag: "sha256:a", dev: "sha256:b"}, false},
		{"no :dev", map[string]string{tag: "sha256:a"}, false},
		{"not loaded", map[string]string{dev: "sha256:a"}, false},
	} {
		if got := loadedAndAliased(tc.have, b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
