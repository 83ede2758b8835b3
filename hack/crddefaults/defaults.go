package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// jsonMarshaler is a type that writes itself (Quantity, Time, IntOrString): a string or a
// number, not an object of its fields.
var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// defaultWhatGoWrites gives a `default: {}` to every object property of a group's pod template
// that the Go type (corev1.PodTemplateSpec) always writes: a struct field, not a pointer, that
// omitempty cannot leave out (a container's resources, the template's metadata). A manifest
// leaves them out; a Go client that reads the job and sends it back (Kueue admitting or
// evicting it) writes them as {}. Without the default the stored job and the one sent back
// differ, and the rules above would refuse that update as a change. With it, the apiserver
// stores them as {} on create and reads older objects the same way, so both sides agree. It
// returns the paths it defaulted, from the group.
func defaultWhatGoWrites(template map[string]any) []string {
	var paths []string
	var walk func(t reflect.Type, s map[string]any, path string)
	walk = func(t reflect.Type, s map[string]any, path string) {
		props, _ := s["properties"].(map[string]any)
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			ft := f.Type
			if name == "" && (f.Anonymous || slices.Contains(strings.Split(opts, ","), "inline")) {
				walk(ft, s, path) // its fields are the parent's
				continue
			}
			p, _ := props[name].(map[string]any)
			if p == nil {
				continue
			}
			at := path + "." + name
			switch {
			case ft.Kind() == reflect.Struct && !writesItself(ft):
				required, _ := p["required"].([]any)
				if !slices.Contains(strings.Split(opts, ","), "omitzero") && len(required) == 0 {
					p["default"] = map[string]any{}
					paths = append(paths, strings.TrimPrefix(at, "."))
				}
				walk(ft, p, at)
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && !writesItself(ft.Elem()):
				walk(ft.Elem(), p, at)
			case ft.Kind() == reflect.Slice:
				elem := ft.Elem()
				if elem.Kind() == reflect.Pointer {
					elem = elem.Elem()
				}
				if items, _ := p["items"].(map[string]any); items != nil && elem.Kind() == reflect.Struct && !writesItself(elem) {
					walk(elem, items, at+"[]")
				}
			}
		}
	}
	walk(reflect.TypeFor[corev1.PodTemplateSpec](), template, "template")
	return paths
}

func writesItself(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)
}
