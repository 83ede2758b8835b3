package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apiserver/pkg/cel"

	"github.com/mlkube/mlkube/hack/internal/crdfile"
)

// Mutable are the properties of a replica group, as paths from the group, that may change while
// its job is suspended: what Kueue sets when it admits a job and restores when it evicts one,
// the pod template fields a suspended Kubernetes Job lets change.
var Mutable = []string{
	"template.metadata.labels",
	"template.metadata.annotations",
	"template.spec.nodeSelector",
	"template.spec.tolerations",
	"template.spec.schedulingGates",
}

// GroupsMessage refuses a replica group added, removed or given another type.
const GroupsMessage = "replica groups cannot be added, removed or change type once the job exists, suspended or not: delete the job and create it again"

// GroupMessage refuses a change to a replica group beyond Mutable.
var GroupMessage = "a replica group cannot change once the job exists, but for what Kueue changes in a suspended job: while runPolicy.suspend is true (before or after the update), its " +
	sentence(Mutable) + " may change; to change anything else, delete the job and create it again"

// result is what immutableCRD wrote into a CRD's last version.
type result struct {
	compared []string // the properties of a group the rules compare, as paths from the group
	mutable  []string // the properties left out, as Mutable names them
	rules    []string // the rules of the group's schema, in order
	costs    []uint64 // the estimated cost of each, one run
	budget   uint64   // the most a rule may cost, one run
	// defaulted are the template's properties given `default: {}` (defaults.go).
	defaulted []string
}

// immutableCRD writes the rules into the replicaSpecs schema of every version of a CRD manifest.
func immutableCRD(data []byte) ([]byte, *result, error) {
	var r *result
	out, err := crdfile.Edit(data, func(version string, root map[string]any) error {
		var err error
		r, err = immutable(root)
		if err != nil {
			return fmt.Errorf("%s: %w", version, err)
		}
		return nil
	})
	return out, r, err
}

// immutable writes the rules into the replicaSpecs schema under root: one on the list, that its
// groups stay the same ones, and some on its items, each comparing properties of a group with
// the same group before the update (the list is a map keyed by the group's type, so the
// apiserver pairs them by it).
func immutable(root map[string]any) (*result, error) {
	list, err := crdfile.Child(root, "spec", "replicaSpecs")
	if err != nil {
		return nil, err
	}
	keys, _ := list["x-kubernetes-list-map-keys"].([]any)
	if list["x-kubernetes-list-type"] != "map" || len(keys) == 0 {
		return nil, errors.New("spec.replicaSpecs is no list of type map: its items' rules would have no old item to compare with")
	}
	item, ok := list["items"].(map[string]any)
	if !ok {
		return nil, errors.New("spec.replicaSpecs has no items schema")
	}
	var sameKey []string
	for _, k := range keys {
		k, err := escape(fmt.Sprint(k))
		if err != nil {
			return nil, err
		}
		sameKey = append(sameKey, "o."+k+" == g."+k)
	}
	setRules(list, GroupsMessage, []string{
		"self.size() == oldSelf.size() && self.all(g, oldSelf.exists(o, " + strings.Join(sameKey, " && ") + "))",
	})

	r := &result{}
	template, err := crdfile.Child(item, "template")
	if err != nil {
		return nil, err
	}
	r.defaulted = defaultWhatGoWrites(template)
	if err := r.walk(item, nil); err != nil {
		return nil, err
	}
	if missing := slices.DeleteFunc(slices.Clone(Mutable), func(m string) bool { return slices.Contains(r.mutable, m) }); len(missing) > 0 {
		return nil, fmt.Errorf("spec.replicaSpecs.items has no %s, which Mutable names", strings.Join(missing, ", "))
	}
	maxItems, err := strconv.ParseUint(fmt.Sprint(list["maxItems"]), 10, 64)
	if err != nil || maxItems == 0 {
		return nil, errors.New("spec.replicaSpecs has no maxItems: a group's rules would be counted once for every group a request can hold, beyond the apiserver's cost limit")
	}
	if err := r.pack(item, CostLimit/maxItems/Margin); err != nil {
		return nil, err
	}
	for _, c := range r.costs {
		if c*maxItems > CostLimit {
			return nil, fmt.Errorf("a rule comparing a group's properties costs %d for each of %d groups, beyond the apiserver's limit %d", c, maxItems, CostLimit)
		}
	}
	setRules(item, GroupMessage, r.rules)
	return r, nil
}

// Unchanged opens every rule comparing a group's properties. The apiserver runs every rule on
// every write, a status write too, where nothing of the spec changes: there one equality of the
// whole group answers at once, where the terms would test and compare it property by property.
// A thousand status writes of three-group TfJobs cost the apiserver 17.6-18.0 s of CPU with it
// and 25.4-25.9 s without (go run ./bench/operator -costs, docs/performance.md). The apiserver
// estimates an equality of objects as cheap, so it moves no rule's budget.
const Unchanged = "self == oldSelf || "

// pack writes the comparisons of r.compared into as few rules as keep each within budget by
// the apiserver's estimate, in order.
func (r *result) pack(item map[string]any, budget uint64) error {
	s, err := schemaOf(item)
	if err != nil {
		return err
	}
	est, err := newEstimator(s)
	if err != nil {
		return fmt.Errorf("spec.replicaSpecs.items: %w", err)
	}
	r.budget = budget
	var terms []string
	var cost uint64
	flush := func() error {
		if len(terms) == 0 {
			return nil
		}
		rule := Unchanged + "(" + strings.Join(terms, "\n&& ") + ")"
		c, err := est.cost(rule)
		if err != nil {
			return err
		}
		r.rules, r.costs, terms, cost = append(r.rules, rule), append(r.costs, c), nil, 0
		return nil
	}
	for _, path := range r.compared {
		term, err := same(path)
		if err != nil {
			return err
		}
		c, err := est.cost(term)
		if err != nil {
			return err
		}
		if c > budget {
			return fmt.Errorf("comparing %s alone costs %d, beyond %d (the apiserver's limit over replicaSpecs' maxItems and Margin): give it a maxLength, maxItems or maxProperties", path, c, budget)
		}
		if cost+c > budget {
			if err := flush(); err != nil {
				return err
			}
		}
		terms, cost = append(terms, term), cost+c
	}
	return flush()
}

// walk sorts the properties of schema s, at path from the group, into compared and mutable,
// going into the ones that hold a mutable property.
func (r *result) walk(s map[string]any, path []string) error {
	if s["x-kubernetes-preserve-unknown-fields"] == true || s["additionalProperties"] != nil {
		return fmt.Errorf("%s holds a mutable property but keeps fields its schema does not name, which no rule could compare", pathOf(path))
	}
	props, _ := s["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p := strings.Join(append(slices.Clip(path), name), ".")
		switch {
		case slices.Contains(Mutable, p):
			r.mutable = append(r.mutable, p)
		case slices.ContainsFunc(Mutable, func(m string) bool { return strings.HasPrefix(m, p+".") }):
			if err := r.walk(props[name].(map[string]any), append(slices.Clip(path), name)); err != nil {
				return err
			}
		default:
			r.compared = append(r.compared, p)
		}
	}
	return nil
}

// same is the CEL that a property, at path from the group, is the same before and after the
// update: absent from both, or present in both and equal. Its presence is read optionally, so
// that an absent parent (a template without metadata, which Kueue's labels then add) reads as
// an absent property; its values are compared directly, since the apiserver estimates the cost
// of comparing two optionals as unbounded and would refuse the CRD. A property name CEL cannot
// spell is escaped as the apiserver does (namespace is __namespace__).
func same(path string) (string, error) {
	var optional, direct strings.Builder
	for _, name := range strings.Split(path, ".") {
		e, err := escape(name)
		if err != nil {
			return "", err
		}
		optional.WriteString(".?" + e)
		direct.WriteString("." + e)
	}
	o, d := optional.String(), direct.String()
	return fmt.Sprintf("(self%s.hasValue() ? oldSelf%s.hasValue() && self%s == oldSelf%s : !oldSelf%s.hasValue())", o, o, d, d, o), nil
}

func escape(name string) (string, error) {
	e, ok := cel.Escape(name)
	if !ok {
		return "", fmt.Errorf("property %q cannot be named in CEL", name)
	}
	return e, nil
}

// setRules replaces the rules of schema s that carry message by rules.
func setRules(s map[string]any, message string, rules []string) {
	var entries []map[string]any
	for _, rule := range rules {
		entries = append(entries, map[string]any{"message": message, "rule": rule})
	}
	crdfile.SetRules(s, func(m map[string]any) bool { return m["message"] == message }, entries)
}

func pathOf(path []string) string {
	if len(path) == 0 {
		return "a replica group"
	}
	return strings.Join(path, ".")
}

// sentence lists words as a sentence does: "a, b and c".
func sentence(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
