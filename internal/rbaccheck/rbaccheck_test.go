package rbaccheck

import (
	"strings"
	"testing"
	"testing/fstest"
)

// good is least privilege: named resources, named verbs, bound to roles in the same files.
const good = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
rules:
- apiGroups: [""]
  resources: ["pods", "pods/log", "configmaps"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["mlkube.io"]
  resources: ["tfjobs/status"]
  verbs: ["patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: reader
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: one-configmap
  namespace: ns
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["mine"]
  verbs: ["get", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: one-configmap
  namespace: ns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: one-configmap}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
`

func load(t *testing.T, files map[string]string) Manifests {
	t.Helper()
	fsys := fstest.MapFS{"rbac/kustomization.yaml": {Data: []byte("resources: [a.yaml]\n")}}
	for name, data := range files {
		fsys["rbac/"+name] = &fstest.MapFile{Data: []byte(data)}
	}
	m, err := Load(fsys, "rbac")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGoodManifestsPass(t *testing.T) {
	m := load(t, map[string]string{"good.yaml": good})
	if len(m.Roles) != 2 || len(m.Bindings) != 2 {
		t.Fatalf("read %d roles and %d bindings, want 2 and 2", len(m.Roles), len(m.Bindings))
	}
	if v := Check(m); v != nil {
		t.Errorf("violations in a least-privilege role:\n%s", strings.Join(v, "\n"))
	}
}

// Each bad role is caught, and the message names the file, the role, the rule and the fault.
func TestBadRolesAreCaught(t *testing.T) {
	role := func(rule string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: bad}\nrules:\n- " + rule + "\n"
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"wildcard verb":           {role(`{apiGroups: [""], resources: [pods], verbs: ["*"]}`), "wildcard in verbs"},
		"wildcard apiGroup":       {role(`{apiGroups: ["*"], resources: [deployments], verbs: [get]}`), "wildcard in apiGroups"},
		"wildcard resource":       {role(`{apiGroups: [apps], resources: ["*"], verbs: [get]}`), "wildcard in resources"},
		"wildcard subresource":    {role(`{apiGroups: [""], resources: ["pods/*"], verbs: [get]}`), "wildcard in resources"},
		"wildcard resourceName":   {role(`{apiGroups: [""], resources: [configmaps], resourceNames: ["*"], verbs: [get]}`), "wildcard in resourceNames"},
		"wildcard nonResourceURL": {role(`{nonResourceURLs: ["/metrics/*"], verbs: [get]}`), "wildcard in nonResourceURLs"},
		"secrets":                 {role(`{apiGroups: [""], resources: [secrets], verbs: [get]}`), "can reach secrets"},
		"one secret by name":      {role(`{apiGroups: [""], resources: [secrets], resourceNames: [tls], verbs: [get]}`), "can reach secrets"},
		"secrets via *":           {role(`{apiGroups: [""], resources: ["*"], verbs: [list]}`), "can reach secrets"},
		"secrets via * group":     {role(`{apiGroups: ["*"], resources: [secrets], verbs: [list]}`), "can reach secrets"},
		"escalate":                {role(`{apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [escalate]}`), `verb "escalate"`},
		"bind":                    {role(`{apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [bind]}`), `verb "bind"`},
		"impersonate":             {role(`{apiGroups: [""], resources: [serviceaccounts], verbs: [impersonate]}`), `verb "impersonate"`},
		"aggregated": {"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: bad}\n" +
			"aggregationRule: {clusterRoleSelectors: [{matchLabels: {x: y}}]}\n", "aggregationRule"},
		"binding to cluster-admin": {"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: bad}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n", "binds ClusterRole cluster-admin, which is not among the checked roles"},
		"binding to a Role elsewhere": {"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: bad, namespace: other}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: one-configmap}\n", "binds Role one-configmap, which is not among the checked roles"},
	} {
		t.Run(name, func(t *testing.T) {
			got := Check(load(t, map[string]string{"good.yaml": good, "bad.yaml": tc.yaml}))
			if len(got) == 0 {
				t.Fatal("no violation")
			}
			for _, v := range got {
				if !strings.HasPrefix(v, "rbac/bad.yaml: ") {
					t.Errorf("a violation outside bad.yaml: %s", v)
				}
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("violations:\n%s\nwant one saying %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
	v := Check(load(t, map[string]string{"bad.yaml": role(`{apiGroups: [""], resources: [secrets], verbs: [get]}`)}))
	want := `rbac/bad.yaml: ClusterRole bad: rule 0 (apiGroups [""] resources ["secrets"] verbs ["get"]): can reach secrets`
	if len(v) != 1 || v[0] != want {
		t.Errorf("violations %q, want exactly %q", v, want)
	}
}

// A rule that does not say what it seems is refused rather than checked as read.
func TestLoadIsStrict(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field": "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: x, namespace: y}\nrules:\n- {apiGroups: [\"\"], resource: [secrets], verbs: [get]}\n",
		"other version":  "apiVersion: rbac.authorization.k8s.io/v1beta1\nkind: ClusterRole\nmetadata: {name: x}\n",
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"rbac/x.yaml": {Data: []byte(doc)}}
			if _, err := Load(fsys, "rbac"); err == nil || !strings.Contains(err.Error(), "rbac/x.yaml") {
				t.Errorf("err = %v, want one naming the file", err)
			}
		})
	}
}

// CheckDir fails when the roles a caller names were not read, or no binding was: reading the
// wrong directory must not pass.
func TestCheckDirNeedsWhatItWasToldToRead(t *testing.T) {
	fsys := fstest.MapFS{"rbac/good.yaml": {Data: []byte(good)}, "empty/x.yaml": {Data: []byte("# nothing\n")}}
	if v := CheckDir(fsys, "rbac", "Role one-configmap"); v != nil {
		t.Errorf("good manifests: %v", v)
	}
	if v := CheckDir(fsys, "rbac", "ClusterRole missing"); len(v) != 1 || !strings.Contains(v[0], "ClusterRole missing not among the roles read") {
		t.Errorf("a missing role: %v", v)
	}
	if v := CheckDir(fsys, "empty"); len(v) != 1 || !strings.Contains(v[0], "no binding read") {
		t.Errorf("an empty directory: %v", v)
	}
}
