package tfjob_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

func TestTensorboardDeploymentServiceAndLink(t *testing.T) {
	ns := namespace(t)
	jobtest.StartOperator(t, ns)
	job := standardJob(ns, "tb")
	job.Spec.Tensorboard = &v1beta1.TensorboardSpec{
		LogDir:       "/logs/tb",
		ServiceType:  corev1.ServiceTypeNodePort,
		Volumes:      []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/logs"}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}},
	}
	must(t, k8s.Create(context.Background(), job))

	job = waitJob(t, ns, "tb", "tensorboard status", func(j *v1beta1.TfJob) error {
		if j.Status.Tensorboard == nil {
			return errorf("no status.tensorboard")
		}
		return nil
	})
	want := v1beta1.TensorboardStatus{
		ServiceName: "tb-tensorboard",
		URL:         "http://tb-tensorboard." + ns + ".svc",
		ProxyPath:   "/api/v1/namespaces/" + ns + "/services/tb-tensorboard:80/proxy/",
	}
	if *job.Status.Tensorboard != want {
		t.Errorf("status.tensorboard %+v, want %+v", *job.Status.Tensorboard, want)
	}

	var dep appsv1.Deployment
	must(t, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "tb-tensorboard"}, &dep))
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "tensorflow/tensorflow:2.16.1" || len(c.Command) < 3 || c.Command[0] != "tensorboard" || c.Command[2] != "/logs/tb" {
		t.Errorf("tensorboard container %s %v", c.Image, c.Command)
	}
	if len(c.VolumeMounts) != 1 || len(dep.Spec.Template.Spec.Volumes) != 1 || dep.Spec.Template.Spec.Volumes[0].HostPath.Path != "/tmp/logs" {
		t.Errorf("tensorboard volumes %+v mounts %+v", dep.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
	if ref := dep.OwnerReferences; len(ref) != 1 || ref[0].UID != job.UID {
		t.Errorf("deployment owners %+v", ref)
	}
	var svc corev1.Service
	must(t, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "tb-tensorboard"}, &svc))
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntVal != 6006 {
		t.Errorf("service %s %+v", svc.Spec.Type, svc.Spec.Ports)
	}

	// The deployment controller is not running here; play it to see the link turn ready.
	dep.Status.Replicas, dep.Status.AvailableReplicas, dep.Status.ReadyReplicas = 1, 1, 1
	must(t, k8s.Status().Update(context.Background(), &dep))
	waitJob(t, ns, "tb", "tensorboard ready", func(j *v1beta1.TfJob) error {
		if !j.Status.Tensorboard.Ready {
			return errorf("not ready")
		}
		return nil
	})

	// TensorBoard outlives the job's end (the results are worth a look) and is not a replica.
	kl := jobtest.Kubelet{T: t, NS: ns}
	kl.Running("tb-master-0", "tb-worker-0", "tb-worker-1", "tb-ps-0", "tb-ps-1")
	kl.Exit("tb-master-0", 0, "Completed")
	waitJob(t, ns, "tb", "done", func(j *v1beta1.TfJob) error {
		if j.Status.State != v1beta1.JobStateSucceeded || j.Status.Phase != v1beta1.JobPhaseDone {
			return errorf("state %q phase %q", j.Status.State, j.Status.Phase)
		}
		return nil
	})
	svcs := jobtest.ListServices(t, ns)
	if _, ok := svcs["tb-tensorboard"]; !ok || len(svcs) != 1 {
		t.Errorf("services after the end: %v, want only tb-tensorboard", keys(svcs))
	}

	// Changing it is refused; removing it removes TensorBoard.
	job = getJob(t, ns, "tb")
	job.Spec.Tensorboard.LogDir = "/elsewhere"
	if err := k8s.Update(context.Background(), job); err == nil || !strings.Contains(err.Error(), "tensorboard cannot be changed once set") {
		t.Errorf("changing spec.tensorboard: %v", err)
	}
	job = getJob(t, ns, "tb")
	job.Spec.Tensorboard = nil
	must(t, k8s.Update(context.Background(), job))
	waitJob(t, ns, "tb", "tensorboard status gone", func(j *v1beta1.TfJob) error {
		if j.Status.Tensorboard != nil {
			return errorf("status.tensorboard %+v", j.Status.Tensorboard)
		}
		return nil
	})
	jobtest.Eventually(t, "tensorboard removed", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "tb-tensorboard"}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return errorf("deployment: %v", err)
		}
		if n := len(jobtest.ListServices(t, ns)); n != 0 {
			return errorf("%d services", n)
		}
		return nil
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
