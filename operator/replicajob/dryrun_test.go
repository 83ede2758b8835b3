package replicajob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// The property: whatever job the CRD accepts decodes whole into its Go type, and the apiserver
// accepts the pods, services and extras (TfJob's TensorBoard) the operator builds for it (a
// server-side dry run). Jobs of every kind in v1beta1.Kinds are generated at random, from a
// fixed seed, as manifests named by the kind's table entry, over what users vary: names up to
// the CRD's limit and beyond, every replica type and group count, ports, restart policies,
// images (some empty), init containers, sidecars and their ports, volumes, labels and
// annotations. The CRD is the oracle: a job it refuses is skipped. What the apiserver would
// refuse of a job the CRD accepts is a bug: a CEL rule missing, or a builder that makes a bad
// object; a job it accepts that its Go type cannot decode stops every client's list of the kind.
//
// Refusals no CEL rule can see (quantities compared, a TensorBoard mount naming no volume: the
// rule's estimated cost is past what the apiserver allows a CRD) are left out here; they fail
// the job or set CreateRefused with the apiserver's message (refusals_test.go).
func TestWhatTheCRDAcceptsTheAPIServerAcceptsToCreate(t *testing.T) {
	ns := namespace(t)
	rng := rand.New(rand.NewPCG(14, 5))
	frameworks := map[*v1beta1.Kind]replicajob.Framework{}
	for _, fw := range operator.Frameworks {
		frameworks[fw.Kind()] = fw
	}
	accepted, refused, edges, sites := map[string]int{}, 0, map[string]int{}, map[string]bool{}
	// Each kind in turn, until it has spread: at least 135 jobs and 20 of them accepted (a kind of
	// many types and rules has few accepted), at most 400.
	i := 0
	for _, k := range v1beta1.Kinds {
		for n := 0; n < 400 && (n < 135 || accepted[k.Name] < 20); n, i = n+1, i+1 {
			fw := frameworks[k]
			if fw == nil {
				t.Fatalf("kind %s has no framework in operator.Frameworks", k.Name)
			}
			manifest := randomJob(rng, k, ns, i)
			job, refusal := dryRun(t, k, manifest)
			if refusal != nil {
				refused++
				continue
			}
			accepted[k.Name]++
			for range 2 {
				site, answer := tryEdge(t, rng, k, manifest)
				edges[answer]++
				sites[site.field] = true
			}
			if job == nil {
				continue // it did not decode: reported
			}
			objs, err := (&replicajob.Reconciler{Framework: fw}).Build(job)
			if err != nil {
				t.Errorf("%s %s: the CRD accepts it, but its pods cannot be built: %v", k.Name, job.GetName(), err)
				continue
			}
			if ext, ok := fw.(replicajob.Extension); ok {
				objs = append(objs, ext.Extras(job)...)
			}
			for _, obj := range objs {
				obj.SetOwnerReferences(nil) // the job was never stored: it has no UID to point at
				if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
					t.Errorf("%s %s is accepted, but the apiserver refuses what the operator builds for it: %v\njob: %+v", k.Name, job.GetName(), err, job)
				}
			}
		}
	}
	t.Logf("%d jobs refused by the CRD; accepted: %v; integers tried at and beyond their bounds: %v", refused, accepted, edges)
	for _, k := range v1beta1.Kinds {
		if accepted[k.Name] < 15 {
			t.Errorf("the generator lost its spread: %d %ss accepted", accepted[k.Name], k.Name)
		}
	}
	if refused < 30 || edges["refused"] < 60 || edges["accepted"] < 25 || len(sites) < len(integerSites) {
		t.Errorf("the generator lost its spread: %d jobs refused; edges %v over %d of %d integers", refused, edges, len(sites), len(integerSites))
	}
}

// dryRun creates the job of kind k in manifest with a server-side dry run. It returns the CRD's
// refusal or, when it accepts the job, what the apiserver would store, decoded into the kind's
// Go type as every client decodes it: nil after reporting that it could not be.
func dryRun(t *testing.T, k *v1beta1.Kind, manifest map[string]any) (v1beta1.Job, error) {
	t.Helper()
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(manifest)}
	if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
		if !apierrors.IsInvalid(err) {
			t.Fatalf("dry run of %s %s: %v", k.Name, u.GetName(), err)
		}
		return nil, err
	}
	job := k.New()
	data, err := json.Marshal(u.Object)
	if err == nil {
		err = json.Unmarshal(data, job)
	}
	if err == nil && job.Unreadable() != "" {
		err = errors.New(job.Unreadable())
	}
	if err != nil {
		t.Errorf("the CRD accepts %s %s, which its Go type cannot decode: %v", k.Name, u.GetName(), err)
		return nil, nil
	}
	return job, nil
}

func pick[T any](rng *rand.Rand, from ...T) T { return from[rng.IntN(len(from))] }

// randomJob is a job of kind k, as a manifest.
func randomJob(rng *rand.Rand, k *v1beta1.Kind, ns string, i int) map[string]any {
	name := fmt.Sprintf("j%d-", i) + strings.Repeat("x", pick(rng, 0, 5, 40, 44, 50))
	name = strings.TrimSuffix(name, "-")
	if rng.IntN(20) == 0 {
		name = strings.ToUpper(name)
	}
	policy := pick(rng, v1beta1.RestartPolicyExitCode, v1beta1.RestartPolicyOnFailure, v1beta1.RestartPolicyNever, v1beta1.RestartPolicyAlways, "")
	types := slices.Clone(k.Types)
	rng.Shuffle(len(types), func(a, b int) { types[a], types[b] = types[b], types[a] })
	var groups []jobtest.Group
	for _, typ := range types[:1+rng.IntN(len(types))] {
		groups = append(groups, jobtest.Group{Type: typ, Replicas: pick[int64](rng, 1, 1, 1, 2, 3), Port: pick[int64](rng, 0, 1, 65535, 8080),
			RestartPolicy: string(policy), Template: unstructuredOf(randomTemplate(rng, k.Container))})
	}
	manifest := jobtest.ManifestOf(k, ns, name, nil, groups...)
	if rng.IntN(3) == 0 {
		// Every kind gets the fields only some have (TfJob's tensorboard): the CRDs of the
		// others prune them.
		vols, mounts := randomVolumes(rng)
		manifest["spec"].(map[string]any)["tensorboard"] = unstructuredOf(&v1beta1.TensorboardSpec{LogDir: "/logs", Volumes: vols, VolumeMounts: mounts,
			ServiceType: pick[corev1.ServiceType](rng, "", "ClusterIP", "NodePort"),
			PodLabels:   randomLabels(rng), PodAnnotations: randomLabels(rng)})
	}
	return manifest
}

func unstructuredOf(obj any) map[string]any {
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return out
}

// randomTemplate is a pod template with the training container and, at times, more.
func randomTemplate(rng *rand.Rand, container string) *corev1.PodTemplateSpec {
	vols, mounts := randomVolumes(rng)
	main := corev1.Container{Name: container, Image: orEmpty(rng, "trainer:1"), VolumeMounts: mounts,
		Env: []corev1.EnvVar{{Name: "STEPS", Value: "10"}}}
	if rng.IntN(3) == 0 {
		// A port of the user's own, sometimes under the name the operator gives the replica's.
		main.Ports = []corev1.ContainerPort{{Name: pick(rng, "metrics", "replica-port"), ContainerPort: int32(pick(rng, 9000, 2222, 9091))}}
	}
	if rng.IntN(3) == 0 {
		main.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{main}, Volumes: vols}
	if rng.IntN(3) == 0 {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: orEmpty(rng, "proxy:1"),
			Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}}})
	}
	if rng.IntN(4) == 0 {
		spec.InitContainers = []corev1.Container{{Name: "fetch", Image: orEmpty(rng, "busybox:1")}}
	}
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: randomLabels(rng), Annotations: randomLabels(rng)}, Spec: spec}
}

// randomVolumes are volumes and mounts that name them.
func randomVolumes(rng *rand.Rand) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for i := range rng.IntN(3) {
		name := fmt.Sprintf("v%d", i)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: "/" + name})
	}
	return vols, mounts
}

func randomLabels(rng *rand.Rand) map[string]string {
	if rng.IntN(2) == 0 {
		return nil
	}
	return map[string]string{"team": "ml", "example.com/tier": pick(rng, "a", "b-1")}
}

// orEmpty is image, or once in 12 no image at all.
func orEmpty(rng *rand.Rand, image string) string {
	if rng.IntN(12) == 0 {
		return ""
	}
	return image
}
