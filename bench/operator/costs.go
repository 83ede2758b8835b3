package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/internal/controlplane"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// runCosts measures what a job's own requests cost the apiserver (`-costs`): n TfJob creates and
// n status writes, 16 at a time, next to the 16n pods and services they stand for. No operator
// can avoid these (the creates are the user's), so they bound how close any TfJob operator gets
// to the floor. To show where the cost comes from it repeats them without the admission policy
// (operator/admission), and with a cheaper CRD that mlkube does not ship, whose pod templates
// are not checked against the pod schema (only the container names its rules read).
func runCosts(n int) {
	fmt.Printf("| CRD | %d TfJob creates (s) | their apiserver CPU (s) | %d status writes (s) | their apiserver CPU (s) | %d pods and services (s) | their apiserver CPU (s) |\n", n, n, n*16)
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- |\n")
	for i, v := range []struct {
		name   string
		edit   func(any)
		policy bool
	}{
		{"as shipped (CRD and admission policy)", nil, true},
		{"without the admission policy", nil, false},
		{"pod templates unchecked, no policy", cutTemplateSchema, false},
	} {
		var dir string
		env, cfg, c := start(func(e *envtest.Environment) {
			dir = editedCRDs(e.CRDDirectoryPaths[0], v.edit)
			e.CRDDirectoryPaths = []string{dir}
		})
		if !v.policy {
			check(controlplane.Enforce(cfg, false))
		}
		ctx := context.Background()
		check(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "costs"}}))
		jobs := make([]*v1beta1.TfJob, n)
		creates, createsCPU := measure(func() error {
			return parallel(n, func(i int) error { jobs[i] = job("costs", i); return c.Create(ctx, jobs[i]) })
		})
		writes, writesCPU := measure(func() error {
			return parallel(n, func(i int) error {
				return c.Status().Patch(ctx, jobs[i], client.RawPatch(types.MergePatchType, createdStatus))
			})
		})
		objects := "| |"
		if i == 0 { // the pods and services do not depend on the CRD
			objs := floorObjects("costs", n, false)
			took, cpu := measure(func() error { return parallel(len(objs), func(i int) error { return c.Create(ctx, objs[i]) }) })
			objects = fmt.Sprintf("| %.1f | %.1f |", took.Seconds(), cpu)
		}
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.1f %s\n", v.name, creates.Seconds(), createsCPU, writes.Seconds(), writesCPU, objects)
		_ = env.Stop()
		os.RemoveAll(dir)
	}
}

// measure runs f and gives its wall time and the apiserver's CPU seconds meanwhile.
func measure(f func() error) (time.Duration, float64) {
	cpu0, t0 := apiserverCPU(), time.Now()
	check(f())
	return time.Since(t0), apiserverCPU() - cpu0
}

// editedCRDs writes the CRDs of directory src, changed by edit, into a temporary directory.
func editedCRDs(src string, edit func(any)) string {
	dir, err := os.MkdirTemp("", "mlkube-bench-crds")
	check(err)
	atExit(func() { os.RemoveAll(dir) })
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	check(err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		check(err)
		if edit != nil {
			var crd any
			check(yaml.Unmarshal(data, &crd))
			edit(crd)
			data, err = yaml.Marshal(crd)
			check(err)
		}
		check(os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644))
	}
	return dir
}

// walk calls f on every map in v, parents first.
func walk(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, x := range v {
			walk(x, f)
		}
	case []any:
		for _, x := range v {
			walk(x, f)
		}
	}
}

// dropRules removes every CEL rule for which drop is true.
func dropRules(crd any, drop func(rule string) bool) {
	walk(crd, func(m map[string]any) {
		rules, ok := m["x-kubernetes-validations"].([]any)
		if !ok {
			return
		}
		var kept []any
		for _, r := range rules {
			if rule, _ := r.(map[string]any)["rule"].(string); !drop(rule) {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(m, "x-kubernetes-validations")
		} else {
			m["x-kubernetes-validations"] = kept
		}
	})
}

// cutTemplateSchema replaces each replica group's pod template schema by one that keeps
// unknown fields unchecked and declares only its containers' names. Every rule that reads the
// template goes with it (the containers' images, the hostname): they name fields the cut schema
// no longer declares, so they would not compile.
func cutTemplateSchema(crd any) {
	dropRules(crd, func(rule string) bool { return strings.Contains(rule, "template") })
	open := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": props}
	}
	container := open(map[string]any{"name": map[string]any{"type": "string"}})
	container["required"] = []any{"name"}
	cut := open(map[string]any{"spec": open(map[string]any{"containers": map[string]any{
		"type": "array", "items": container,
		"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"name"},
	}})})
	walk(crd, func(m map[string]any) {
		if props, ok := m["properties"].(map[string]any); ok {
			if _, ok := props["template"]; !ok {
				return
			}
			for _, k := range v1beta1.Kinds {
				if props[k.TypeField] != nil {
					props["template"] = cut
				}
			}
		}
	})
}
