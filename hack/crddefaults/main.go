// Command crddefaults gives `default: {}` to every object of a replica group's pod template that
// Go always writes and a manifest leaves out (defaults.go), so that a Go client's update of a
// job it read (Kueue admitting or evicting it) is no change to the job as stored. The
// admission policy that keeps replica groups as created (operator/admission) compares the two.
// `make generate` runs it on operator/config/crd/bases after controller-gen.
//
//	go run ./hack/crddefaults FILE...
package main

import (
	"fmt"
	"strings"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
)

func main() {
	crdfile.Main("crddefaults", func(data []byte) ([]byte, string, error) {
		var defaulted []string
		out, err := crdfile.Edit(data, func(version string, root map[string]any) error {
			template, err := crdfile.Child(root, "spec", "replicaSpecs", "[]", "template")
			if err != nil {
				return fmt.Errorf("%s: %w", version, err)
			}
			defaulted = defaultWhatGoWrites(template)
			return nil
		})
		if err != nil {
			return nil, "", err
		}
		return out, "default {} for " + strings.Join(defaulted, ", "), nil
	})
}
