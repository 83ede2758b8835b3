// Package cache says where devctl keeps what it remembers between runs: the images it built, what
// it applied and loaded, a multi-node cluster's network configs.
package cache

import (
	"os"
	"path/filepath"
)

// Dir is where devctl keeps what it remembers between runs, beside what the scripts cache:
// $MLKUBE_CACHE, else $XDG_CACHE_HOME/mlkube, else ~/.cache/mlkube.
func Dir() (string, error) {
	if dir := os.Getenv("MLKUBE_CACHE"); dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mlkube"), nil
}

// ClusterDir holds what belongs to the cluster called name alone, and goes with it.
func ClusterDir(name string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "clusters", name), nil
}
