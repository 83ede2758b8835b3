package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// MaxName is the most characters a job's name may have: its longest replica hostname,
// <name>-evaluator-<index> with an index below 10000, has 48 + 11 + 4 = 63.
const MaxName = 48

// generatedSuffix is how many random characters the apiserver appends to generateName, and
// maxGeneratedPrefix how much of generateName it keeps (k8s.io/apiserver's names package).
const (
	generatedSuffix    = 5
	maxGeneratedPrefix = 58
)

// A Rule is one x-kubernetes-validations entry. Message is also what the apiserver says should
// the message expression fail, and what the docs quote.
type Rule struct {
	Rule, Message, MessageExpression string
}

// hostnames is why a name is bounded, in every name rule.
const hostnames = "each replica's hostname is <name>-<type>-<index>, and hostnames stop at 63"

// NameRules are the rules on the root of every kind's CRD. Their messages name metadata.name;
// their message expressions name generateName instead when the name was generated from it.
var NameRules = []Rule{
	{
		Rule:    fmt.Sprintf("size(self.metadata.name) <= %d", MaxName),
		Message: fmt.Sprintf("metadata.name must be at most %d characters: %s", MaxName, hostnames),
		MessageExpression: fromGenerateName(fmt.Sprintf("metadata.generateName must be at most %d characters: the apiserver appends %d random characters to it to make metadata.name, which must be at most %d: %s",
			MaxName-generatedSuffix, generatedSuffix, MaxName, hostnames)),
	},
	{
		Rule:    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
		Message: "metadata.name must start with a letter and hold only lower-case letters, digits and '-': " + prefixes,
		MessageExpression: fromGenerateName(fmt.Sprintf("metadata.generateName must start with a letter and hold only lower-case letters, digits and '-': the apiserver appends %d random letters and digits to it to make metadata.name, which %s",
			generatedSuffix, prefixes[len("it "):])),
	},
}

// The rules on each replica group's pod template sit on the fields they read, not on the group.
// The apiserver evaluates every rule of a CRD at each create and at each status write too, and
// each field a rule reads costs it a copy of the properties of the object holding it (about 40
// for a PodSpec). Placed on the group, four rules cost 1.0-1.2 s of apiserver CPU for a thousand
// creates and as much again for their status writes; on the containers list, and on hostname
// and subdomain themselves (evaluated only when set), a third of that; an image is schema, not a
// rule (bench/operator -costs, docs/performance.md).

// ContainerRule is the rule on each group's template.spec.containers: the framework's container
// is there.
func ContainerRule(k *v1beta1.Kind) Rule {
	return Rule{
		Rule:    fmt.Sprintf("self.exists(c, c.name == '%s')", k.Container),
		Message: fmt.Sprintf("needs a container named '%s': the operator gives it %s, and its exit code decides the replica's outcome", k.Container, k.Gets),
	}
}

// SetByTheOperator is the rule on a template's hostname and on its subdomain, which fails
// whenever the field is set: the operator sets both.
var SetByTheOperator = Rule{
	Rule:    "false",
	Message: "is set by the operator: each replica is <job>-<type>-<index> in the job's headless service, which is how the others find it; remove it",
}

// ImageLists are the lists of a template whose every item needs an image: a schema requirement
// (required, minLength 1), which the apiserver checks as it walks the object anyway.
var ImageLists = []string{"containers", "initContainers"}

// prefixes is why a name is a DNS-1035 label.
const prefixes = "it names the job's headless service and prefixes the replica hostnames (DNS-1035 labels)"

// fromGenerateName is a message expression: generated, when the job's name was made from its
// generateName (of which the apiserver keeps at most maxGeneratedPrefix characters); otherwise
// "", on which the apiserver says the rule's message. The message names no generated name,
// which would differ from one try to the next.
func fromGenerateName(generated string) string {
	return fmt.Sprintf("has(self.metadata.generateName) && self.metadata.generateName != '' && "+
		"self.metadata.name.startsWith(size(self.metadata.generateName) > %d ? self.metadata.generateName.substring(0, %d) : self.metadata.generateName)"+
		" ? %s : ''", maxGeneratedPrefix, maxGeneratedPrefix, strconv.Quote(generated))
}

// MaxLabelValue and LabelValuePattern are what the apiserver takes as a label value
// (k8s.io/apimachinery's validation.IsValidLabelValue): a pod's template carrying any other is
// refused only when the operator creates the pod.
const (
	MaxLabelValue     = 63
	LabelValuePattern = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
)

// rules writes the shared rules into the schema under root, a CRD of kind k.
func rules(k *v1beta1.Kind, root map[string]any) error {
	setRules(root, NameRules)
	podSpec, err := crdfile.Child(root, "spec", "replicaSpecs", "[]", "template", "spec")
	if err != nil {
		return err
	}
	containers, err := crdfile.Child(podSpec, "containers")
	if err != nil {
		return err
	}
	setRules(containers, []Rule{ContainerRule(k)})
	for _, field := range []string{"hostname", "subdomain"} {
		s, err := crdfile.Child(podSpec, field)
		if err != nil {
			return err
		}
		setRules(s, []Rule{SetByTheOperator})
	}
	for _, list := range ImageLists {
		container, err := crdfile.Child(podSpec, list, "[]")
		if err != nil {
			return err
		}
		image, err := crdfile.Child(container, "image")
		if err != nil {
			return err
		}
		image["minLength"] = 1
		required, _ := container["required"].([]any)
		if !slices.Contains(required, any("image")) {
			container["required"] = append(required, "image")
		}
	}
	labels, err := crdfile.Child(root, "spec", "replicaSpecs", "[]", "template", "metadata", "labels")
	if err != nil {
		return err
	}
	value, ok := labels["additionalProperties"].(map[string]any)
	if !ok || value["type"] != "string" {
		return errors.New("spec.replicaSpecs.items.template.metadata.labels is no map of strings")
	}
	value["maxLength"] = MaxLabelValue
	value["pattern"] = LabelValuePattern
	return quantitiesToThePolicy(root)
}

// QuantityLists are the resource lists of a template's containers whose quantities the admission
// policy checks (operator/admission), where users write them.
var QuantityLists = [][]string{
	{"containers", "resources", "limits"}, {"containers", "resources", "requests"},
	{"initContainers", "resources", "limits"}, {"initContainers", "resources", "requests"},
}

// quantitiesToThePolicy takes the quantity pattern off the containers' requests and limits.
// Its refusal quotes a regular expression at the user ("4x4" should match '^(\+|-)?...'); the
// admission policy says "not a quantity" instead, naming the container and the resource. A
// cluster without the policy stores such a job, and the operator, which cannot decode it, says
// so in its status (Unreadable) and runs every other job: no job's pods are made from it.
func quantitiesToThePolicy(root map[string]any) error {
	for _, path := range QuantityLists {
		list, err := crdfile.Child(root, slices.Concat([]string{"spec", "replicaSpecs", "[]", "template", "spec"}, path[:1], []string{"[]"}, path[1:])...)
		if err != nil {
			return err
		}
		value, ok := list["additionalProperties"].(map[string]any)
		if !ok || value["x-kubernetes-int-or-string"] != true {
			return fmt.Errorf("%v holds no quantities", path)
		}
		delete(value, "pattern")
	}
	return nil
}

// setRules puts rules after the schema's other rules, replacing any with the same rule.
func setRules(s map[string]any, rules []Rule) {
	var entries []map[string]any
	for _, r := range rules {
		entry := map[string]any{"rule": r.Rule, "message": r.Message}
		if r.MessageExpression != "" {
			entry["messageExpression"] = r.MessageExpression
		}
		entries = append(entries, entry)
	}
	crdfile.SetRules(s, func(m map[string]any) bool {
		return slices.ContainsFunc(rules, func(r Rule) bool { return m["rule"] == r.Rule })
	}, entries)
}
