package accelerator

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func waitLoads(t *testing.T, s *Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Loads() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d loads, want %d", s.Loads(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStoreStartsEmptyWhenFileMissingAndPicksItUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "accelerators.yaml")
	s, err := NewStore(path, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Config().Accelerators) != 0 {
		t.Fatalf("config %+v from a missing file", s.Config())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Start(ctx) }()
	time.Sleep(100 * time.Millisecond)

	// Written in place, as an editor would.
	if err := os.WriteFile(path, []byte(debian), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLoads(t, s, 1)
	if len(s.Config().Accelerators["nvidia.com/gpu"].Volumes) != 3 {
		t.Errorf("config %+v", s.Config())
	}

	// Broken: logged, and the good config stays.
	if err := os.WriteFile(path, []byte("accelerators: ["), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if len(s.Config().Accelerators["nvidia.com/gpu"].Volumes) != 3 {
		t.Errorf("a broken file replaced the config: %+v", s.Config())
	}
	// Fixed again: picked up.
	if err := os.WriteFile(path, []byte("accelerators: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLoads(t, s, 2)
	if len(s.Config().Accelerators) != 0 {
		t.Errorf("config %+v", s.Config())
	}
}

func TestStoreRefusesBadFileAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accelerators.yaml")
	if err := os.WriteFile(path, []byte("accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: x, hostPath: rel, mountPath: /m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(path, logr.Discard()); err == nil {
		t.Fatal("a bad file at start was accepted")
	}
}

func TestStoreIgnoresAnEmptyFileAndWaitsForItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-mounted-yet")
	path := filepath.Join(dir, "accelerators.yaml")
	s, err := NewStore(path, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Start(ctx) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("stopped while the directory is missing: %v", err)
	default:
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(debian), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLoads(t, s, 1) // within the 5 s it waits between looks for the directory

	// Truncated, as in the middle of an in-place rewrite: not an empty config.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if len(s.Config().Accelerators) != 1 {
		t.Errorf("an empty file replaced the config: %+v", s.Config())
	}
}
