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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds CRD.yaml...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := boundFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdbounds: %s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// boundFile bounds the integers of the CRD in path, rewriting it when that changes it.
func boundFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, b, err := boundCRD(data)
	if err != nil {
		return err
	}
	fmt.Printf("crdbounds: %s: %d integers bounded, %d of them by this run\n", path, b.bounded, b.changed)
	if bytes.Equal(out, data) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// documentStart is how controller-gen begins each file.
const documentStart = "---\n"

// boundCRD bounds the integers of every version's schema in a CRD manifest. It writes the
// manifest as controller-gen does (sigs.k8s.io/yaml, keys sorted), so that only the bounds
// differ; numbers stay json.Numbers, as a float64 would round an int64's bounds.
func boundCRD(data []byte) ([]byte, *bounder, error) {
	body, hasStart := bytes.CutPrefix(data, []byte(documentStart))
	if bytes.Contains(body, []byte("\n"+documentStart)) {
		return nil, nil, errors.New("more than one YAML document: controller-gen writes one CRD a file")
	}
	var crd map[string]any
	if err := yaml.Unmarshal(body, &crd, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }); err != nil {
		return nil, nil, err
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return nil, nil, fmt.Errorf("kind %v, not a CustomResourceDefinition", crd["kind"])
	}
	b := &bounder{}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		v := v.(map[string]any)
		schema, _ := v["schema"].(map[string]any)
		root, ok := schema["openAPIV3Schema"].(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("version %v has no openAPIV3Schema", v["name"])
		}
		b.node(root, fmt.Sprint(v["name"]))
	}
	if len(b.unbounded) > 0 {
		return nil, nil, fmt.Errorf("integers that cannot be bounded:\n  %s", strings.Join(b.unbounded, "\n  "))
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, nil, err
	}
	if hasStart {
		out = append([]byte(documentStart), out...)
	}
	return out, b, nil
}
