package follow

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A Group is one replica group of a job: its type as the output names it (master, scheduler)
// and how many replicas it has.
type Group struct {
	Type     string
	Replicas int32
}

// KindOf is the kind of a job; nil for an object that is no job.
func KindOf(job client.Object) *v1beta1.Kind { return v1beta1.KindOf(job) }

// StatusOf is the job's status.
func StatusOf(job client.Object) *v1beta1.JobStatus { return job.(v1beta1.Job).JobStatus() }

// GroupsOf lists the job's replica groups in spec order, types in lower case.
func GroupsOf(job client.Object) []Group {
	var out []Group
	for _, g := range job.(v1beta1.Job).Groups() {
		out = append(out, Group{Type: strings.ToLower(g.Type), Replicas: g.Replicas})
	}
	return out
}

// Unreadable says why the job as stored could not be decoded whole (v1beta1.Job.Unreadable),
// naming the field; "" when it could.
func Unreadable(job client.Object) string {
	if j, ok := job.(v1beta1.Job); ok {
		return j.Unreadable()
	}
	return ""
}

// CannotAct is the error for doing something to an unreadable job: it has no spec here, so
// devctl would act on nothing the user wrote. It names the field and what to do about it.
func CannotAct(job client.Object, doing string) error {
	return fmt.Errorf("cannot %s %s in namespace %s: it is unreadable (%s); %s", doing, Ref(job), job.GetNamespace(), Unreadable(job), v1beta1.UnreadableHint)
}

// Ref names a job the way kubectl does: "tfjob/distributed".
func Ref(job client.Object) string { return KindOf(job).Ref(job.GetName()) }

// ReplicaNames lists a job's replicas in spec order the way the output names them: master-0,
// worker-0, worker-1, ps-0; scheduler-0, server-0, worker-0.
func ReplicaNames(job client.Object) []string {
	if job == nil || KindOf(job) == nil {
		return nil
	}
	var names []string
	for _, g := range GroupsOf(job) {
		n := g.Replicas
		if n < 1 {
			n = 1 // the apiserver's default; a job read from a file may not have it yet
		}
		for i := range n {
			names = append(names, g.Type+"-"+strconv.Itoa(int(i)))
		}
	}
	return names
}
