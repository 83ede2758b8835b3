package replicajob_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/mxjob"
	"github.com/mlkube/mlkube/operator/replicajob"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// The property: whatever job the CRD accepts, the apiserver accepts the pods, services and
// TensorBoard objects the operator builds for it (a server-side dry run). Jobs are generated at
// random, from a fixed seed, over what users vary: names up to the CRD's limit and beyond, every
// replica type and group count, ports, restart policies, images (some empty), init containers,
// sidecars and their ports, volumes, labels and annotations. The CRD is the oracle: a job it
// refuses is skipped. What the apiserver would refuse of a job the CRD accepts is a bug: a CEL
// rule missing, or a builder that makes a bad object.
//
// Refusals no CEL rule can see (quantities compared, a TensorBoard mount naming no volume: the
// rule's estimated cost is past what the apiserver allows a CRD) are left out here; they fail
// the job or set CreateRefused with the apiserver's message (refusals_test.go).
func TestWhatTheCRDAcceptsTheAPIServerAcceptsToCreate(t *testing.T) {
	ns := namespace(t)
	rng := rand.New(rand.NewPCG(14, 5))
	frameworks := map[string]replicajob.Framework{"TfJob": tfjob.Framework{}, "MXJob": mxjob.Framework{}}
	accepted, refused := map[string]int{}, 0
	for i := range 400 {
		job := randomJob(rng, ns, i)
		kind := job.GetObjectKind().GroupVersionKind().Kind
		if err := k8s.Create(context.Background(), job, client.DryRunAll); err != nil {
			if !apierrors.IsInvalid(err) {
				t.Fatalf("dry run of job %d: %v", i, err)
			}
			refused++
			continue
		}
		accepted[kind]++
		objs, err := (&replicajob.Reconciler{Framework: frameworks[kind]}).Build(job.(v1beta1.Job))
		if err != nil {
			t.Errorf("%s %s: the CRD accepts it, but its pods cannot be built: %v", kind, job.GetName(), err)
			continue
		}
		if tf, ok := job.(*v1beta1.TfJob); ok && tf.Spec.Tensorboard != nil {
			dep, svc := tfjob.TensorboardObjects(tf)
			objs = append(objs, dep, svc)
		}
		for _, obj := range objs {
			obj.SetOwnerReferences(nil) // the job was never stored: it has no UID to point at
			if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
				t.Errorf("%s %s is accepted, but the apiserver refuses what the operator builds for it: %v\njob: %+v", kind, job.GetName(), err, job)
			}
		}
	}
	t.Logf("%d jobs refused by the CRD; accepted: %v", refused, accepted)
	if accepted["TfJob"] < 25 || accepted["MXJob"] < 25 || refused < 30 {
		t.Errorf("the generator lost its spread: accepted %v, refused %d", accepted, refused)
	}
}

func pick[T any](rng *rand.Rand, from ...T) T { return from[rng.IntN(len(from))] }

// randomJob is a TfJob or an MXJob, at random.
func randomJob(rng *rand.Rand, ns string, i int) client.Object {
	name := fmt.Sprintf("j%d-", i) + strings.Repeat("x", pick(rng, 0, 5, 40, 44, 50))
	name = strings.TrimSuffix(name, "-")
	if rng.IntN(20) == 0 {
		name = strings.ToUpper(name)
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	policy := pick(rng, v1beta1.RestartPolicyExitCode, v1beta1.RestartPolicyOnFailure, v1beta1.RestartPolicyNever, v1beta1.RestartPolicyAlways, "")
	if rng.IntN(2) == 0 {
		job := &v1beta1.TfJob{ObjectMeta: meta}
		job.APIVersion, job.Kind = v1beta1.GroupVersion.String(), "TfJob"
		types := []v1beta1.TfReplicaType{"MASTER", "CHIEF", "WORKER", "PS", "EVALUATOR"}
		rng.Shuffle(len(types), func(a, b int) { types[a], types[b] = types[b], types[a] })
		for _, typ := range types[:1+rng.IntN(len(types))] {
			job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, v1beta1.TfReplicaSpec{
				TfReplicaType: typ, Replicas: int32(pick(rng, 1, 1, 2, 3)), TfPort: int32(pick(rng, 0, 2222, 1, 65535, 8080)),
				RestartPolicy: policy, Template: randomTemplate(rng, v1beta1.TfContainerName),
			})
		}
		if rng.IntN(3) == 0 {
			vols, mounts := randomVolumes(rng)
			job.Spec.Tensorboard = &v1beta1.TensorboardSpec{LogDir: "/logs", Volumes: vols, VolumeMounts: mounts,
				ServiceType: pick[corev1.ServiceType](rng, "", "ClusterIP", "NodePort"),
				PodLabels:   randomLabels(rng), PodAnnotations: randomLabels(rng)}
		}
		return job
	}
	job := &v1beta1.MXJob{ObjectMeta: meta}
	job.APIVersion, job.Kind = v1beta1.GroupVersion.String(), "MXJob"
	for _, typ := range []v1beta1.MXReplicaType{"SCHEDULER", "SERVER", "WORKER"} {
		if typ != "SCHEDULER" && rng.IntN(4) == 0 {
			continue
		}
		job.Spec.ReplicaSpecs = append(job.Spec.ReplicaSpecs, v1beta1.MXReplicaSpec{
			MXReplicaType: typ, Replicas: int32(pick(rng, 1, 1, 2)), Port: int32(pick(rng, 0, 9091, 1, 65535)),
			RestartPolicy: policy, Template: randomTemplate(rng, v1beta1.MXContainerName),
		})
	}
	return job
}

// randomTemplate is a pod template with the training container and, at times, more.
func randomTemplate(rng *rand.Rand, container string) corev1.PodTemplateSpec {
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
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: randomLabels(rng), Annotations: randomLabels(rng)}, Spec: spec}
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
