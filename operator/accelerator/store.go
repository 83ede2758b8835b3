package accelerator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// Store holds the config in force and reloads it from its file when the file changes.
type Store struct {
	path    string
	log     logr.Logger
	current atomic.Pointer[Config]
	// loads counts successful loads; tests wait on it.
	loads atomic.Int64
}

// NewStore loads the file at path. A missing file is an empty config (nodeprobe may not have
// published one yet); a file that is there but bad is an error, so a typo stops the operator at
// start instead of being ignored.
func NewStore(path string, log logr.Logger) (*Store, error) {
	s := &Store{path: path, log: log}
	s.current.Store(&Config{})
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		log.Info("accelerator config not there yet; GPU containers get no driver paths until it is", "path", path)
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.current.Store(cfg)
	s.loads.Add(1)
	return s, nil
}

// Config is the config in force.
func (s *Store) Config() *Config { return s.current.Load() }

// Loads is how many times a config was loaded successfully.
func (s *Store) Loads() int64 { return s.loads.Load() }

// MutatePod applies the config in force to a pod about to be created.
func (s *Store) MutatePod(pod *corev1.Pod) { s.Config().Inject(&pod.Spec) }

// Start watches the file until ctx ends. It watches the directory, not the file: a mounted
// ConfigMap is updated by swapping a symlink (..data), which replaces the file rather than
// writing to it, and a watch on the file itself would be left on the old one.
func (s *Store) Start(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	dir := filepath.Dir(s.path)
	for err := w.Add(dir); err != nil; err = w.Add(dir) {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("watching %s for accelerator config changes: %w", dir, err)
		}
		// Not mounted yet: wait for it rather than stop the operator.
		s.log.Info("accelerator config directory missing; waiting for it", "dir", dir)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
	// The file may have changed between NewStore and the watch starting.
	s.reloadIfChanged()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			s.reloadIfChanged()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Error(err, "watching accelerator config")
		}
	}
}

// reloadIfChanged reloads when the file's content differs from what is in force: any event in
// the directory brings us here, and most are not about our file. A bad file is logged and the
// last good config stays; a missing one is a ConfigMap mid-swap, and the next event brings it.
func (s *Store) reloadIfChanged() {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Error(err, "cannot read accelerator config; keeping the last good one", "path", s.path)
		return
	}
	if len(data) == 0 {
		// Rewritten in place and caught between truncate and write; an empty config is
		// spelled `accelerators: {}`.
		return
	}
	cfg, err := Parse(data)
	if err != nil {
		s.log.Error(err, "bad accelerator config; keeping the last good one", "path", s.path)
		return
	}
	if reflect.DeepEqual(cfg, s.Config()) {
		return
	}
	s.current.Store(cfg)
	s.loads.Add(1)
	s.log.Info("accelerator config loaded", "path", s.path, "resources", cfg.resources())
}
