// Package mxjob is the MXJob framework on the replica-job engine: MXNet's replica types, the
// DMLC_* env that points every replica at the scheduler, and the scheduler deciding the job.
package mxjob

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/replicajob"
)

// +kubebuilder:rbac:groups=mlkube.io,resources=mxjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=mlkube.io,resources=mxjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=mlkube.io,resources=mxjobs/finalizers,verbs=update

// Framework plugs MXJob into the engine.
type Framework struct{}

var _ replicajob.Framework = Framework{}

// Kind is MXJob.
func (Framework) Kind() *v1beta1.Kind { return v1beta1.KindOf(&v1beta1.MXJob{}) }

// Decider is the scheduler: MXNet's scheduler exits once every worker has finished.
func (Framework) Decider([]replicajob.Replica) string { return string(v1beta1.MXReplicaScheduler) }

// Env is what MXNet's parameter-server runtime (ps-lite) reads to join the cluster: the
// replica's role, where the scheduler is, and how many servers and workers to wait for.
func (Framework) Env(job v1beta1.Job, replicas []replicajob.Replica, typ string, index int) ([]corev1.EnvVar, error) {
	if err := checkReplicas(replicas, typ, index); err != nil {
		return nil, err
	}
	counts := map[string]int32{}
	var scheduler *replicajob.Replica
	for i, r := range replicas {
		counts[r.Type] = r.Replicas
		if r.Type == string(v1beta1.MXReplicaScheduler) {
			scheduler = &replicas[i]
		}
	}
	host := replicajob.Host(job, scheduler.Type, 0, scheduler.Port)
	host = host[:strings.LastIndex(host, ":")]
	return []corev1.EnvVar{
		{Name: "DMLC_ROLE", Value: strings.ToLower(typ)},
		{Name: "DMLC_PS_ROOT_URI", Value: host},
		{Name: "DMLC_PS_ROOT_PORT", Value: fmt.Sprint(scheduler.Port)},
		{Name: "DMLC_NUM_SERVER", Value: fmt.Sprint(counts[string(v1beta1.MXReplicaServer)])},
		{Name: "DMLC_NUM_WORKER", Value: fmt.Sprint(counts[string(v1beta1.MXReplicaWorker)])},
	}, nil
}

// checkReplicas names each replica group field that would make the env wrong, as the CRD
// would (a type outside its enum or used twice, which DMLC_NUM_* cannot count; replicas outside
// 1-10000, or a SCHEDULER group of more than one; a port outside 1-65535), a missing SCHEDULER
// group, and a replica asked for that is none of the job's. The apiserver refuses such jobs;
// this keeps one stored before a rule existed from starting with a wrong env.
func checkReplicas(replicas []replicajob.Replica, typ string, index int) error {
	types := []string{string(v1beta1.MXReplicaScheduler), string(v1beta1.MXReplicaServer), string(v1beta1.MXReplicaWorker)}
	first, errs := replicajob.CheckGroups(replicas, types, replicajob.Fields{Type: "mxReplicaType", Port: "port"}, typ, index)
	scheduler, ok := first[string(v1beta1.MXReplicaScheduler)]
	if !ok {
		errs = append(errs, errors.New("replicaSpecs has no SCHEDULER group: every replica finds the cluster through it"))
	} else if n := replicas[scheduler].Replicas; n != 1 {
		errs = append(errs, fmt.Errorf("replicaSpecs[%d].replicas %d: the SCHEDULER group has exactly one replica", scheduler, n))
	}
	return errors.Join(errs...)
}
