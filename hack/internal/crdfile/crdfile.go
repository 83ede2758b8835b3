// Package crdfile reads and rewrites the CRDs controller-gen writes, for the programs that
// `make generate` runs on them after controller-gen (hack/crdbounds, crdrules, crdimmutable): each
// edits every version's schema and writes the manifest back as controller-gen does, so that
// only its edit differs.
package crdfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// documentStart is how controller-gen begins each file.
const documentStart = "---\n"

// Edit calls edit with each version's name and openAPIV3Schema in a CRD manifest, and writes
// the manifest again as controller-gen does (sigs.k8s.io/yaml, keys sorted). Numbers stay
// json.Numbers, as a float64 would round an int64.
func Edit(data []byte, edit func(version string, schema map[string]any) error) ([]byte, error) {
	body, hasStart := bytes.CutPrefix(data, []byte(documentStart))
	if bytes.Contains(body, []byte("\n"+documentStart)) {
		return nil, errors.New("more than one YAML document: controller-gen writes one CRD a file")
	}
	var crd map[string]any
	if err := yaml.Unmarshal(body, &crd, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }); err != nil {
		return nil, err
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return nil, fmt.Errorf("kind %v, not a CustomResourceDefinition", crd["kind"])
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		v := v.(map[string]any)
		schema, _ := v["schema"].(map[string]any)
		root, ok := schema["openAPIV3Schema"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("version %v has no openAPIV3Schema", v["name"])
		}
		if err := edit(fmt.Sprint(v["name"]), root); err != nil {
			return nil, err
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	if hasStart {
		out = append([]byte(documentStart), out...)
	}
	return out, nil
}

// Main runs a program's transform on each CRD file its arguments name, rewriting a file when
// that changes it and printing the summary the transform returns. A file that fails is left
// as it was, and makes the program exit 1 once every file has been tried.
func Main(program string, transform func(data []byte) (out []byte, summary string, err error)) {
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "usage: %s CRD.yaml...\n", program)
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		summary, err := rewrite(path, transform)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s: %v\n", program, path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: %s: %s\n", program, path, summary)
	}
	if failed {
		os.Exit(1)
	}
}

// rewrite transforms the CRD in path, writing it back when that changes it.
func rewrite(path string, transform func([]byte) ([]byte, string, error)) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	out, summary, err := transform(data)
	if err != nil || bytes.Equal(out, data) {
		return summary, err
	}
	return summary, os.WriteFile(path, out, 0o644)
}

// Sample is a CRD of one version as controller-gen writes it, whose spec has the given
// properties (YAML, as under `properties:`), for the generators' tests.
func Sample(specProperties string) []byte {
	var b strings.Builder
	b.WriteString(`---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: probes.example.com
spec:
  group: example.com
  names:
    kind: Probe
    plural: probes
  scope: Namespaced
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties:
`)
	b.WriteString(Indent(specProperties, "              "))
	b.WriteString(`            type: object
        type: object
    served: true
    storage: true
`)
	return []byte(b.String())
}

// Indent puts by before each line of text, leaving out its leading and trailing blank lines.
func Indent(text, by string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		b.WriteString(by + line + "\n")
	}
	return b.String()
}
