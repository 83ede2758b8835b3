package manifests

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// podTemplateKinds are the kinds whose spec.template is a pod template.
var podTemplateKinds = map[string]bool{"Deployment": true, "DaemonSet": true, "StatefulSet": true, "Job": true}

// SetImage replaces the image from by to in every container and init container of every pod
// template among objs. It is an error when no container uses from: the manifests and devctl have
// drifted apart, and the cluster would try to pull an image that exists nowhere.
func SetImage(objs []*unstructured.Unstructured, from, to string) error {
	replaced := 0
	for _, u := range objs {
		if !podTemplateKinds[u.GetKind()] {
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			fields := []string{"spec", "template", "spec", field}
			containers, found, err := unstructured.NestedSlice(u.Object, fields...)
			if err != nil {
				return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			if !found {
				continue
			}
			for _, c := range containers {
				c, ok := c.(map[string]any)
				if ok && c["image"] == from {
					c["image"] = to
					replaced++
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, containers, fields...); err != nil {
				return err
			}
		}
	}
	if replaced == 0 {
		return fmt.Errorf("no container in the manifests uses the image %s", from)
	}
	return nil
}

// Find returns the object of that kind and name among objs, or nil.
func Find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetNamespace() == namespace && u.GetName() == name {
			return u
		}
	}
	return nil
}
