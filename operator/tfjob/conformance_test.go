package tfjob_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// TfJob on the shared behaviour of the replica-job engine.
func TestConformance(t *testing.T) {
	jobtest.Conformance(t, jobtest.Kind{
		Name: "TfJob", Decider: "MASTER", Other: "WORKER",
		NewJob: func(ns, name string, policy v1beta1.RunPolicy) client.Object {
			job := newJob(ns, name, replicaGroup(v1beta1.TfReplicaMaster, 1), replicaGroup(v1beta1.TfReplicaWorker, 2))
			job.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name}
			job.Spec.RunPolicy = policy
			return job
		},
		Status: func(obj client.Object) *v1beta1.JobStatus { return &obj.(*v1beta1.TfJob).Status },
		CheckEnv: func(t *testing.T, job client.Object, pod corev1.Pod) {
			var cfg tfjob.Config
			env := pod.Spec.Containers[0].Env
			if len(env) != 1 || env[0].Name != "TF_CONFIG" || json.Unmarshal([]byte(env[0].Value), &cfg) != nil {
				t.Fatalf("pod %s env %+v, want TF_CONFIG", pod.Name, env)
			}
			if len(cfg.Cluster["master"]) != 1 || len(cfg.Cluster["worker"]) != 2 || cfg.Task.Type != pod.Labels["mlkube.io/replica-type"] {
				t.Errorf("pod %s TF_CONFIG %+v", pod.Name, cfg)
			}
		},
	})
}
