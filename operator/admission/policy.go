// Package admission is the ValidatingAdmissionPolicy that checks what a job's CRD cannot check
// cheaply: how a job may change once it exists, and what in its pod templates no pod could
// carry. `make generate` writes it to operator/config/admission (hack/admissionpolicy), from
// where kustomize, the chart and `devctl up` install it; the tests install it from here.
//
// Why a policy and not CRD rules: the apiserver runs every CRD rule on every write, a status
// write too, where a job's spec never changes. A policy matches the kinds' resources and not
// their /status subresource, so the operator's status writes never pay for it; and its cost is
// counted as it runs, where a CRD rule's is estimated, per rule, as if every list and string
// were as long as a request can hold (docs/architecture.md).
//
// Every expression reads the job as unstructured data: a field Kubernetes adds to the pod spec
// is compared without a word here, and a rule reads the same on every kind.
package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Name names the policy and its binding.
const Name = "mlkube.io-jobs"

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

// TensorboardMessage refuses a change to a TfJob's tensorboard.
const TensorboardMessage = "tensorboard cannot be changed once set: remove it (which deletes TensorBoard) and add it again"

// RunningMessage refuses any change to the groups of a job of kind k that is not suspended.
func RunningMessage(k *v1beta1.Kind) string {
	return "replicaSpecs cannot change unless the job is suspended (" + k.Told + "): delete the job and create it again"
}

// Messages that start the refusals of what no pod could carry; each names the field and value.
const (
	LabelKeyMessage      = "is not a label key a pod can carry"
	AnnotationKeyMessage = "is not an annotation key a pod can carry"
	AnnotationsMessage   = "annotations of more than 256 KiB in all, which a pod cannot carry"
	QuantityMessage      = "is not a quantity: write a number with an optional suffix, e.g. 2, 500m, 1.5Gi (a TPU topology such as 4x4 belongs in a node selector)"
	WholeMessage         = "is not a whole number: a pod asks for whole units of an extended resource (a GPU, a TPU slice); write 1, 2, ..."
	EqualMessage         = "differs from its limit: a pod's request of an extended resource must equal its limit; leave the request out, or make them equal"
	QueueMessage         = "can name no LocalQueue (a queue's name is a DNS-1123 subdomain: lower case letters, digits, \"-\" and \".\"); name an existing queue (kubectl get localqueues)"
)

// QueueLabel is the label that puts a job in a Kueue LocalQueue.
const QueueLabel = "kueue.x-k8s.io/queue-name"

// Policy is the policy: it matches updates of every kind's resource (not /status) for how a job
// changes, and creates too for what no pod could carry.
func Policy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	var resources []string
	for _, k := range v1beta1.Kinds {
		resources = append(resources, k.Plural)
	}
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{v1beta1.GroupVersion.Group},
							APIVersions: []string{v1beta1.GroupVersion.Version},
							// The resources alone: a rule of a subresource would say "tfjobs/status".
							Resources: resources,
						},
					},
				}},
			},
			Variables:   variables(),
			Validations: validations(),
		},
	}
}

// Binding binds the policy to every namespace, denying what it refuses.
func Binding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

// variables are named once and evaluated only when an expression reads them, at most once a
// request. The apiserver's work per expression evaluated outweighs what most of these do, so a
// create evaluates few: two validations, and the variables the second reads.
func variables() []admissionregistrationv1.Variable {
	typeFields := map[string]string{}
	kinds := map[string]string{}
	for _, k := range v1beta1.Kinds {
		typeFields[k.Name] = k.TypeField
		kinds[k.Name] = RunningMessage(k)
	}
	suspended := "object.spec.?runPolicy.?suspend.orValue(false) || oldObject.spec.?runPolicy.?suspend.orValue(false)"
	tensorboard := "(has(object.spec.tensorboard) && has(oldObject.spec.tensorboard) && object.spec.tensorboard != oldObject.spec.tensorboard ? " +
		quote("spec.tensorboard: "+TensorboardMessage) + " : '')"
	sameTypes := "variables.groups.size() == variables.oldGroups.size() && variables.groups.all(g, variables.oldGroups.exists(o, o[variables.key] == g[variables.key]))"
	queue := "object.metadata.?labels[?" + quote(QueueLabel) + "]"
	queueProblems := "(!" + queue + ".hasValue() || (request.operation == 'UPDATE' && oldObject.metadata.?labels[?" + quote(QueueLabel) + "] == " + queue + ") || " +
		"!format.dns1123Subdomain().validate(" + queue + ".value()).hasValue() ? [] : [" +
		quote("metadata.labels["+QueueLabel+"]: \"") + " + " + queue + ".value() + " + quote("\" "+QueueMessage) + "])"
	return []admissionregistrationv1.Variable{
		// The field of a group that holds its type, by which old and new groups pair up.
		{Name: "key", Expression: celMap(typeFields) + "[request.kind.kind]"},
		{Name: "running", Expression: celMap(kinds) + "[request.kind.kind]"},
		{Name: "groups", Expression: "object.spec.replicaSpecs"},
		{Name: "oldGroups", Expression: "oldObject.spec.replicaSpecs"},
		// The groups changed beyond Mutable, one "replicaSpecs[TYPE]: a, b" each.
		{Name: "changed", Expression: "variables.groups.map(g, variables.oldGroups.filter(o, o[variables.key] == g[variables.key])" +
			".map(o, " + changes("g", "o") + ")" +
			".filter(c, c.size() > 0).map(c, 'replicaSpecs[' + string(g[variables.key]) + ']: ' + c.join(', ')).join('; ')).filter(s, s != '')"},
		// What an update changes that it may not, as the refusal says it, or '': one refusal,
		// the first that applies, so that a running job's gives its kind's reason. Most updates
		// leave the groups as they were (metadata, suspend), and only the tensorboard is left.
		{Name: "change", Expression: "!(" + suspended + ") && variables.groups != variables.oldGroups ? 'spec.replicaSpecs: ' + variables.running" +
			" : variables.groups == variables.oldGroups ? " + tensorboard +
			" : !(" + sameTypes + ") ? " + quote("spec.replicaSpecs: "+GroupsMessage) +
			" : variables.changed.size() > 0 ? 'spec.' + variables.changed.join('; spec.') + " + quote(": "+GroupMessage) +
			" : " + tensorboard},
		// Each group's containers, init containers included, with its type.
		{Name: "containers", Expression: "variables.groups.map(g, (g.?template.?spec.?containers.orValue([]) + g.?template.?spec.?initContainers.orValue([]))" +
			".map(c, {'group': g[variables.key], 'c': c}))"},
		// What the job holds that no pod could carry, one "FIELD: VALUE MESSAGE" each. An update
		// checks again only what it changes: a job stored before a rule existed (or while the
		// policy was left out) can still be suspended, resumed, finalized and deleted.
		{Name: "problems", Expression: queueProblems + " + (request.operation == 'UPDATE' && variables.groups == variables.oldGroups ? [] : " +
			strings.Join(podProblems(), " + ") + ")"},
	}
}

func validations() []admissionregistrationv1.Validation {
	return []admissionregistrationv1.Validation{
		{Expression: "request.operation != 'UPDATE' || variables.change == ''", MessageExpression: "variables.change"},
		{Expression: "variables.problems.size() == 0", MessageExpression: "variables.problems.join('; ')"},
	}
}

// podProblems are CEL lists of what in the groups' templates no pod could carry, as "FIELD:
// VALUE MESSAGE", each empty when all is well.
func podProblems() []string {
	// perGroup gives a list of one string per group that has something bad: bad is CEL giving,
	// for group g, a list of strings.
	perGroup := func(bad string) string {
		return "variables.groups.map(g, " + bad + ".join('; ')).filter(s, s != '')"
	}
	at := "'spec.replicaSpecs[' + string(g[variables.key]) + '].template.metadata."
	keys := func(field, message, key string) string {
		m := "g.?template.?metadata.?" + field + ".orValue({})"
		check := "format.qualifiedName().validate(" + key + ")"
		return perGroup(m + ".filter(k, " + check + ".hasValue())" +
			".map(k, " + at + field + ": \"' + k + '\" ' + " + quote(message+" (") + " + " + check + ".value().join(', ') + ')')")
	}
	annotations := "g.?template.?metadata.?annotations.orValue({})"
	// An extended resource is a resource name with a domain that is not kubernetes.io's
	// (IsExtendedResourceName in Kubernetes' pod validation); a pod asks for whole ones.
	extended := "(k.contains('/') && !k.contains('kubernetes.io/') && !k.startsWith('requests.'))"
	field := func(list string) string {
		return "'spec.replicaSpecs[' + x.group + '].template.spec.containers[' + string(x.c.name) + '].resources." + list + "[' + k + ']: '"
	}
	value := func(list string) string { return "string(x.c.resources." + list + "[k])" }
	perContainer := func(bad string) string {
		// bad is CEL giving, for container x, a list of strings.
		return "variables.containers.map(cs, cs.map(x, " + bad + ".join('; ')).filter(s, s != '').join('; ')).filter(s, s != '')"
	}
	var notQuantity, notWhole []string
	for _, list := range []string{"limits", "requests"} {
		notQuantity = append(notQuantity, perContainer("x.c.?resources[?'"+list+"'].orValue({})"+
			// k != '' tells the type checker that k is a string, as the other lists' filters do.
			".filter(k, k != '' && !isQuantity("+value(list)+"))"+
			".map(k, "+field(list)+" + '\"' + "+value(list)+" + '\" ' + "+quote(QuantityMessage)+")"))
		notWhole = append(notWhole, perContainer("x.c.?resources[?'"+list+"'].orValue({})"+
			".filter(k, "+extended+" && isQuantity("+value(list)+") && !quantity("+value(list)+").isInteger())"+
			".map(k, "+field(list)+" + "+value(list)+" + "+quote(" "+WholeMessage)+")"))
	}
	return []string{
		keys("labels", LabelKeyMessage, "k"),
		// The apiserver checks an annotation key in lower case.
		keys("annotations", AnnotationKeyMessage, "k.lowerAscii()"),
		"variables.groups.filter(g, " + annotations + ".map(k, size(k) + size(" + annotations + "[k])).sum() > 262144)" +
			".map(g, 'spec.replicaSpecs[' + string(g[variables.key]) + '].template.metadata.annotations: ' + " + quote(AnnotationsMessage) + ")",
		strings.Join(notQuantity, " + "),
		strings.Join(notWhole, " + "),
		perContainer("x.c.?resources[?'requests'].orValue({})" +
			".filter(k, " + extended + " && isQuantity(" + value("requests") + ") && x.c.?resources[?'limits'][?k].hasValue()" +
			" && isQuantity(" + value("limits") + ") && quantity(" + value("requests") + ").compareTo(quantity(" + value("limits") + ")) != 0)" +
			".map(k, " + field("requests") + " + " + value("requests") + " + " + quote(" "+EqualMessage+" (") + " + " + value("limits") + " + ')')"),
	}
}

// changes is CEL listing the paths, from the group, at which group g and its old self o differ,
// but for Mutable: at each level that holds a mutable property, every other key is compared.
func changes(g, o string) string {
	var parts []string
	for _, level := range levels() {
		at := func(v string) string {
			if level.path == "" {
				return v
			}
			return v + ".?" + strings.ReplaceAll(level.path, ".", ".?") + ".orValue({})"
		}
		a, b := at(g), at(o)
		except := "['" + strings.Join(level.except, "', '") + "']"
		prefix := ""
		if level.path != "" {
			prefix = level.path + "."
		}
		parts = append(parts, fmt.Sprintf("(%[1]s.filter(k, !(k in %[3]s) && (!(k in %[2]s) || %[1]s[k] != %[2]s[k])) + %[2]s.filter(k, !(k in %[3]s) && !(k in %[1]s))).map(k, '%[4]s' + k)",
			a, b, except, prefix))
	}
	return strings.Join(parts, " + ")
}

// level is an object on the way to a mutable property: its path from the group, and its keys
// that are not compared there (mutable, or compared at a level of their own).
type level struct {
	path   string
	except []string
}

// levels are the group itself and every object between it and a Mutable property.
func levels() []level {
	except := map[string][]string{"": nil}
	for _, m := range Mutable {
		parts := strings.Split(m, ".")
		for i := range parts {
			parent := strings.Join(parts[:i], ".")
			if _, ok := except[parent]; !ok {
				except[parent] = nil
			}
			if !slices.Contains(except[parent], parts[i]) {
				except[parent] = append(except[parent], parts[i])
			}
		}
	}
	var out []level
	for _, p := range slices.Sorted(maps.Keys(except)) {
		out = append(out, level{path: p, except: except[p]})
	}
	return out
}

// celMap is a CEL map literal of m, its keys in order.
func celMap(m map[string]string) string {
	var entries []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		entries = append(entries, quote(k)+": "+quote(m[k]))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }

// sentence lists words as a sentence does: "a, b and c".
func sentence(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
