package replicajob_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The operator runs a job through a restart, TensorBoard, success and TTL as its service
// account, with nothing but the RBAC in operator/config/rbac: what the code does, the
// generated role allows.
func TestOperatorNeedsOnlyItsRBAC(t *testing.T) {
	ns := namespace(t)
	applyRBAC(t)
	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:mlkube-system:mlkube-operator"}

	mgr, err := operator.New(asOperator, operator.Options{
		Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0", ManyPerProcess: true,
		LeaderElection: true, LeaderElectionNamespace: "mlkube-system", LeaderElectionID: "rbac-test",
	})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	job := standardJob(ns, "rbac")
	job.Spec.Tensorboard = &v1beta1.TensorboardSpec{LogDir: "/logs"}
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](1)
	must(t, k8s.Create(context.Background(), job))
	waitPods(t, ns, podNames("rbac")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("rbac")...)
	kl.Exit("rbac-ps-1", 137, "Error")
	waitEvent(t, ns, "rbac", "Restarting", "rbac-ps-1")
	eventually(t, "ps-1 recreated", func() error {
		if p, ok := listPods(t, ns)["rbac-ps-1"]; !ok || p.Status.Phase != corev1.PodPending {
			return errorf("not yet")
		}
		return nil
	})
	waitJob(t, ns, "rbac", "tensorboard", func(j *v1beta1.TfJob) error {
		if j.Status.Tensorboard == nil {
			return errorf("no tensorboard status")
		}
		return nil
	})
	kl.Exit("rbac-master-0", 0, "Completed")
	waitEvent(t, ns, "rbac", "Succeeded")
	eventually(t, "job deleted by TTL", func() error {
		var j v1beta1.TfJob
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "rbac"}, &j)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errorf("job still there (%v), phase %s", err, j.Status.Phase)
	})
}

var rbacApplied bool

// applyRBAC creates what operator/config/rbac holds, once per test run.
func applyRBAC(t *testing.T) {
	t.Helper()
	if rbacApplied {
		return
	}
	ctx := context.Background()
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mlkube-system"}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../config/rbac/*.yaml")
	must(t, err)
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.Open(f)
		must(t, err)
		dec := yaml.NewYAMLOrJSONDecoder(data, 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := k8s.Create(ctx, &obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: %v", f, err)
			}
		}
		data.Close()
	}
	rbacApplied = true
}
