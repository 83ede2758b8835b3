// Command crdbounds gives every integer of the CRDs controller-gen writes a minimum and a
// maximum its Go type can hold: `make generate` runs it on operator/config/crd/bases after
// controller-gen. The apiserver ignores `format: int32`, so without them a CRD accepts a
// number its own Go type cannot decode (a ttlSecondsAfterFinished of 2592000000, a container
// port of 3000000000), and a client's list of that kind then fails whole. A bound of a marker
// as tight or tighter stays; an integer it cannot bound (a Go int, an unknown int-or-string)
// fails the generation, naming the field.
//
//	go run ./hack/crdbounds FILE...
package main

import (
	"fmt"
	"strings"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
)

func main() {
	crdfile.Main("crdbounds", func(data []byte) ([]byte, string, error) {
		out, b, err := boundCRD(data)
		if err != nil {
			return nil, "", err
		}
		return out, fmt.Sprintf("%d integers bounded, %d of them by this run", b.bounded, b.changed), nil
	})
}

// boundCRD bounds the integers of every version's schema in a CRD manifest; only the bounds
// differ from what controller-gen wrote, and numbers keep their digits (crdfile.Edit).
func boundCRD(data []byte) ([]byte, *bounder, error) {
	b := &bounder{}
	out, err := crdfile.Edit(data, func(version string, root map[string]any) error {
		b.node(root, version)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(b.unbounded) > 0 {
		return nil, nil, fmt.Errorf("integers that cannot be bounded:\n  %s", strings.Join(b.unbounded, "\n  "))
	}
	return out, b, nil
}
