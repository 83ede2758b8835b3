package mxjob_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/mxjob"
	"github.com/mlkube/mlkube/operator/replicajob"
)

func TestMain(m *testing.M) { jobtest.Main(m, nil) }

func group(typ v1beta1.MXReplicaType, replicas int32) v1beta1.MXReplicaSpec {
	return v1beta1.MXReplicaSpec{
		MXReplicaType: typ,
		Replicas:      replicas,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "mxnet", Image: "mlkube/trainer:test"}},
		}},
	}
}

func newJob(ns, name string, groups ...v1beta1.MXReplicaSpec) *v1beta1.MXJob {
	return &v1beta1.MXJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1beta1.MXJobSpec{ReplicaSpecs: groups}}
}

func TestEnv(t *testing.T) {
	job := newJob("ns", "mx", group(v1beta1.MXReplicaScheduler, 1), group(v1beta1.MXReplicaServer, 2), group(v1beta1.MXReplicaWorker, 3))
	job.Spec.ReplicaSpecs[0].Port = 9000
	fw := mxjob.Framework{}
	cluster, err := replicajob.Resolve(fw, job)
	if err != nil {
		t.Fatal(err)
	}
	vars := fw.Env(cluster, "SERVER", 1)
	var got []string
	for _, v := range vars {
		got = append(got, v.Name+"="+v.Value)
	}
	want := "DMLC_ROLE=server DMLC_PS_ROOT_URI=mx-scheduler-0.ns.svc DMLC_PS_ROOT_PORT=9000 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=3"
	if strings.Join(got, " ") != want {
		t.Errorf("env\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if fw.Decider(job.Groups()) != "SCHEDULER" {
		t.Error("the scheduler must decide")
	}
}

func TestInvalidMXJobsAreRefused(t *testing.T) {
	ns := jobtest.Namespace(t)
	noMXNet := group(v1beta1.MXReplicaWorker, 1)
	noMXNet.Template.Spec.Containers[0].Name = "main"
	for _, tc := range []struct {
		name string
		job  *v1beta1.MXJob
		want string
	}{
		{"no-scheduler", newJob(ns, "a", group(v1beta1.MXReplicaWorker, 2)), "replicaSpecs needs a SCHEDULER group"},
		{"two-schedulers", newJob(ns, "b", group(v1beta1.MXReplicaScheduler, 2)), "the SCHEDULER group has exactly one replica"},
		{"no-mxnet-container", newJob(ns, "c", group(v1beta1.MXReplicaScheduler, 1), noMXNet), "needs a container named 'mxnet'"},
		{"unknown-type", newJob(ns, "d", group(v1beta1.MXReplicaScheduler, 1), group("PS", 1)), `Unsupported value: "PS"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := jobtest.Client.Create(context.Background(), tc.job)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create: %v, want Invalid containing %q", err, tc.want)
			}
		})
	}

	job := newJob(ns, "immutable", group(v1beta1.MXReplicaScheduler, 1), group(v1beta1.MXReplicaWorker, 1))
	jobtest.Must(t, jobtest.Client.Create(context.Background(), job))
	job.Spec.ReplicaSpecs[1].Replicas = 4
	if err := jobtest.Client.Update(context.Background(), job); err == nil || !strings.Contains(err.Error(), "replicaSpecs cannot change once the job exists") {
		t.Errorf("changing replicas: %v", err)
	}
}
