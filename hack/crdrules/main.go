// Command crdrules writes the rules every job kind shares into each kind's CRD, stated here once
// rather than as markers repeated in the four *_types.go: `make generate` runs it on
// operator/config/crd/bases after controller-gen.
//
//   - On the root, the name rules: a job's name prefixes every replica's hostname
//     (<name>-<type>-<index>, at most 63), so it has at most 48 characters and is a DNS-1035
//     label. A job created with generateName is refused in words about generateName and the
//     five characters the apiserver appends to it, not about a name the user never wrote.
//   - On each replica group's pod template, what the operator needs of it: the framework's
//     container (named in the kinds table), an image in every container and init container,
//     and no hostname or subdomain (the operator sets them). Each sits on the field it reads
//     (rules.go says why).
//   - On each replica group's pod template, the label values no pod could carry: at most 63
//     characters, the apiserver's label value syntax. These are schema (maxLength, pattern),
//     which costs the apiserver no CEL budget: the refusal names the label and shows the value.
//
// What the pods' own validation checks beyond that (label and annotation keys, quantities,
// extended resources) is no CRD rule: see docs/architecture.md#validation for why (the
// apiserver's cost estimate of such rules is far beyond its limit). The admission policy checks
// them (operator/admission); the containers' quantities lose their pattern here, so that the
// policy's words ("not a quantity") are what the user reads.
//
//	go run ./hack/crdrules FILE...
package main

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func main() { crdfile.Main("crdrules", transform) }

// transform writes the shared rules into every version of a CRD manifest.
func transform(data []byte) ([]byte, string, error) {
	var crd struct {
		Spec struct {
			Names struct{ Kind string }
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, "", err
	}
	k := v1beta1.KindNamed(crd.Spec.Names.Kind)
	if k == nil {
		return nil, "", fmt.Errorf("kind %q is not in the kinds table", crd.Spec.Names.Kind)
	}
	out, err := crdfile.Edit(data, func(version string, root map[string]any) error {
		if err := rules(k, root); err != nil {
			return fmt.Errorf("%s: %w", version, err)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, fmt.Sprintf("%d name rules on the root; on each replica group's template, the %s container, images, no hostname or subdomain, label values at most %d characters of the label syntax", len(NameRules), k.Container, MaxLabelValue), nil
}
