// Package docker gets the images a job names from the local Docker engine into the nodes of
// a kind cluster, as `kind load docker-image` does by hand: an image built with `docker build`
// is in the engine, not on the nodes, and a pod naming it would wait in ErrImagePull for ever.
// It lists the images of a job of any kind (Of), asks the engine which of them it holds and under
// which image ID (InEngine), and the nodes which of those they lack (Check); devctl's commands
// do the loading, with the archive and the loading devctl up uses for its own images.
package docker

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// A Use is one container of a job's pods and the image it runs.
type Use struct {
	Image string
	// PullPolicy is the container's, as the job gives it (empty: the kubelet's default).
	PullPolicy corev1.PullPolicy
	// Where says which container: "WORKER container tensorflow", "mnist-tensorboard container
	// tensorboard" (an extra object, by its name).
	Where string
}

// Of lists every container, init containers first, of the pods a job makes: each replica
// group's template, in spec order, then the pods of the objects its framework adds beside the
// replicas (a TfJob's TensorBoard), as the operator would create them. The job may come from a
// file: the apiserver's defaults need not be applied.
func Of(job v1beta1.Job) []Use {
	var uses []Use
	for _, g := range job.Groups() {
		if g.Template != nil {
			uses = append(uses, ofPod(&g.Template.Spec, g.Type)...)
		}
	}
	for _, obj := range extras(job) {
		if spec := podSpecOf(obj); spec != nil {
			uses = append(uses, ofPod(spec, obj.GetName())...)
		}
	}
	return uses
}

// PullsAlways says the kubelet pulls the image on every start of the container, and so never
// runs an image loaded into the node: imagePullPolicy Always, the default for :latest and for
// no tag.
func (u Use) PullsAlways() bool {
	if u.PullPolicy != "" {
		return u.PullPolicy == corev1.PullAlways
	}
	full, ok := FullName(u.Image)
	return ok && strings.HasSuffix(full, ":latest")
}

// Refs are the images of uses, each once, in the order of their first use.
func Refs(uses []Use) []string {
	var refs []string
	for _, u := range uses {
		if u.Image != "" && !slices.Contains(refs, u.Image) {
			refs = append(refs, u.Image)
		}
	}
	return refs
}

func ofPod(spec *corev1.PodSpec, where string) []Use {
	var uses []Use
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			uses = append(uses, Use{Image: c.Image, PullPolicy: c.ImagePullPolicy, Where: where + " container " + c.Name})
		}
	}
	return uses
}

// extras are the objects the job's framework makes beside its replicas. The frameworks
// describe them (replicajob.Extension), so no kind needs naming here.
func extras(job v1beta1.Job) []client.Object {
	kind := v1beta1.KindOf(job)
	for _, fw := range operator.Frameworks {
		if ext, ok := fw.(replicajob.Extension); ok && fw.Kind() == kind {
			return ext.Extras(job)
		}
	}
	return nil
}

// podSpecOf finds the pod spec of an object that makes pods: a Pod's spec, or the
// spec.template.spec of a Deployment, StatefulSet, Job, or any object shaped like them.
func podSpecOf(obj client.Object) *corev1.PodSpec {
	if pod, ok := obj.(*corev1.Pod); ok {
		return &pod.Spec
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	raw, found, err := unstructured.NestedMap(u, "spec", "template", "spec")
	if err != nil || !found {
		return nil
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil
	}
	return &spec
}
