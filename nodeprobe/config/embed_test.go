package config

import (
	"io/fs"
	"path"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every file the kustomization names is embedded: a directory added to the kustomization but
// not to the go:embed line would be missing for devctl.
func TestEmbedsEveryResource(t *testing.T) {
	var walk func(dir string)
	walk = func(dir string) {
		data, err := fs.ReadFile(FS, path.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.UnmarshalStrict(data, &k); err != nil {
			t.Fatal(err)
		}
		for _, r := range k.Resources {
			p := path.Join(dir, r)
			info, err := fs.Stat(FS, p)
			if err != nil {
				t.Errorf("%s names %s, which is not embedded: %v", dir, r, err)
				continue
			}
			if info.IsDir() {
				walk(p)
			}
		}
	}
	walk(".")
}
