// Package rbaccheck holds mlkube's RBAC manifests to least privilege: no wildcards, no access
// to secrets, none of the verbs that hand out more rights than a role has (escalate, bind,
// impersonate), and no binding to a role the check cannot see (cluster-admin, say).
package rbaccheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Role is a Role or a ClusterRole, and the file it came from.
type Role struct {
	File      string
	Kind      string
	Namespace string
	Name      string
	Rules     []rbacv1.PolicyRule
	// Aggregated is set for a ClusterRole with an aggregationRule: its rules are whatever other
	// ClusterRoles carry the labels, which no check of these files can see.
	Aggregated bool
}

func (r Role) String() string {
	if r.Namespace != "" {
		return fmt.Sprintf("%s: %s %s/%s", r.File, r.Kind, r.Namespace, r.Name)
	}
	return fmt.Sprintf("%s: %s %s", r.File, r.Kind, r.Name)
}

// Binding is a RoleBinding or a ClusterRoleBinding.
type Binding struct {
	File      string
	Kind      string
	Namespace string
	Name      string
	RoleRef   rbacv1.RoleRef
}

// Manifests are the roles and bindings of a set of files.
type Manifests struct {
	Roles    []Role
	Bindings []Binding
}

// Load reads every .yaml file of dir in fsys (not its subdirectories), every document in them,
// and keeps the roles and bindings. Each is decoded strictly: a misspelt field ("verb:") would
// otherwise be dropped, and the check would pass a rule that is not what it looks like.
func Load(fsys fs.FS, dir string) (Manifests, error) {
	var m Manifests
	files, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return m, err
	}
	for _, file := range files {
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return m, err
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return m, fmt.Errorf("%s: %w", file, err)
			}
			if err := m.add(file, doc); err != nil {
				return m, fmt.Errorf("%s: %w", file, err)
			}
		}
	}
	return m, nil
}

func (m *Manifests) add(file string, doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	if head.Kind == "" {
		return nil // a kustomization, or an empty document
	}
	rbac := head.APIVersion == rbacv1.SchemeGroupVersion.String()
	switch {
	case rbac && head.Kind == "Role":
		var r rbacv1.Role
		if err := yaml.UnmarshalStrict(doc, &r); err != nil {
			return err
		}
		m.Roles = append(m.Roles, Role{File: file, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Rules: r.Rules})
	case rbac && head.Kind == "ClusterRole":
		var r rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(doc, &r); err != nil {
			return err
		}
		m.Roles = append(m.Roles, Role{File: file, Kind: r.Kind, Name: r.Name, Rules: r.Rules, Aggregated: r.AggregationRule != nil})
	case rbac && (head.Kind == "RoleBinding" || head.Kind == "ClusterRoleBinding"):
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields, less the namespace
		if err := yaml.UnmarshalStrict(doc, &b); err != nil {
			return err
		}
		m.Bindings = append(m.Bindings, Binding{File: file, Kind: b.Kind, Namespace: b.Namespace, Name: b.Name, RoleRef: b.RoleRef})
	case strings.HasPrefix(head.APIVersion, rbacv1.GroupName+"/"):
		// Another version of RBAC would escape the checks above.
		return fmt.Errorf("%s %s: only %s is checked", head.APIVersion, head.Kind, rbacv1.SchemeGroupVersion)
	}
	return nil
}

// forbiddenVerbs hand out rights beyond the role's own: escalate grants permissions the holder
// lacks, bind binds any role, impersonate acts as anyone.
var forbiddenVerbs = []string{"escalate", "bind", "impersonate"}

// Check returns every violation, one readable line each naming the file, the role, the rule
// (by its index) and what is wrong; nil when there is none.
//
// A binding may name one of the cluster's built-in roles that grant no more than the checks
// would allow (knownRoles) instead of a role of the manifests.
func Check(m Manifests) []string {
	var out []string
	for _, r := range m.Roles {
		if r.Aggregated {
			out = append(out, fmt.Sprintf("%s: aggregationRule: its rules come from other ClusterRoles and cannot be checked", r))
		}
		for i, rule := range r.Rules {
			for _, v := range checkRule(rule) {
				out = append(out, fmt.Sprintf("%s: rule %d %s: %s", r, i, describe(rule), v))
			}
		}
	}
	for _, b := range m.Bindings {
		if b.RoleRef.Kind == "ClusterRole" && knownRoles[b.RoleRef.Name] {
			continue
		}
		if !slices.ContainsFunc(m.Roles, func(r Role) bool { return binds(b, r) }) {
			out = append(out, fmt.Sprintf("%s: %s %s binds %s %s, which is not among the checked roles",
				b.File, b.Kind, b.Name, b.RoleRef.Kind, b.RoleRef.Name))
		}
	}
	return out
}

// binds says whether b's roleRef names r: a Role in the RoleBinding's own namespace, or a
// ClusterRole.
func binds(b Binding, r Role) bool {
	if b.RoleRef.Kind != r.Kind || b.RoleRef.Name != r.Name || b.RoleRef.APIGroup != rbacv1.GroupName {
		return false
	}
	return r.Kind == "ClusterRole" || r.Namespace == b.Namespace
}

func checkRule(rule rbacv1.PolicyRule) []string {
	var out []string
	for _, field := range []struct {
		name   string
		values []string
	}{
		{"verbs", rule.Verbs}, {"apiGroups", rule.APIGroups}, {"resources", rule.Resources},
		{"resourceNames", rule.ResourceNames}, {"nonResourceURLs", rule.NonResourceURLs},
	} {
		// "*" alone, and within a value: "pods/*", "*/scale", "/metrics/*".
		if slices.ContainsFunc(field.values, func(v string) bool { return strings.Contains(v, "*") }) {
			out = append(out, fmt.Sprintf("wildcard in %s", field.name))
		}
	}
	for _, v := range forbiddenVerbs {
		if slices.Contains(rule.Verbs, v) {
			out = append(out, fmt.Sprintf("verb %q", v))
		}
	}
	if reachesSecrets(rule) {
		out = append(out, "can reach secrets")
	}
	return out
}

// reachesSecrets says whether the rule grants anything on secrets or their subresources, by name
// or through a wildcard.
func reachesSecrets(rule rbacv1.PolicyRule) bool {
	core := slices.ContainsFunc(rule.APIGroups, func(g string) bool { return g == "" || g == "*" })
	return core && slices.ContainsFunc(rule.Resources, func(r string) bool {
		name, _, _ := strings.Cut(r, "/")
		return name == "secrets" || name == "*"
	})
}

// describe is the rule in one line, as kubectl describe shows it.
func describe(rule rbacv1.PolicyRule) string {
	s := fmt.Sprintf("(apiGroups %q resources %q verbs %q", rule.APIGroups, rule.Resources, rule.Verbs)
	if len(rule.ResourceNames) > 0 {
		s += fmt.Sprintf(" resourceNames %q", rule.ResourceNames)
	}
	if len(rule.NonResourceURLs) > 0 {
		s += fmt.Sprintf(" nonResourceURLs %q", rule.NonResourceURLs)
	}
	return s + ")"
}

// CheckDir loads dir of fsys and checks it, and also fails unless each of the named roles
// ("ClusterRole name", "Role name") and at least one binding were read: a check that read
// nothing would pass anything.
func CheckDir(fsys fs.FS, dir string, roles ...string) []string {
	m, err := Load(fsys, dir)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, want := range roles {
		if !slices.ContainsFunc(m.Roles, func(r Role) bool { return r.Kind+" "+r.Name == want }) {
			out = append(out, fmt.Sprintf("%s not among the roles read from %s: %v", want, dir, m.Roles))
		}
	}
	if len(m.Bindings) == 0 {
		out = append(out, "no binding read from "+dir)
	}
	return append(out, Check(m)...)
}

// knownRoles are the built-in ClusterRoles a binding may name. system:auth-delegator grants
// creating TokenReviews and SubjectAccessReviews, which a namespaced operator needs to check its
// trainers' tokens (a Role cannot grant them) and which read nothing of the cluster.
var knownRoles = map[string]bool{"system:auth-delegator": true}
