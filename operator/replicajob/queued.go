package replicajob

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A job labelled with Kueue's queue-name (kueue.x-k8s.io/queue-name) waits for Kueue. Kueue's
// own integrations suspend such a job in a defaulting webhook before it is stored; mlkube runs
// no webhook server, so the engine holds a queued job whose runPolicy.suspend is unset as if it
// were true: no pod is created until Kueue's integration (operator/kueue) has suspended it
// explicitly and then admitted it (suspend false). An explicit suspend: false is the user's, and
// runs at once; Kueue's integration then suspends the job until it is admitted.

// QueueLabel names the LocalQueue a job waits in (Kueue's label).
const QueueLabel = constants.QueueLabel

// The reasons of a queued job's Suspended and Running conditions: Kueue's verdict.
const (
	ReasonQueued   = "Queued"   // waiting to be admitted (for quota, for its LocalQueue, ...)
	ReasonEvicted  = "Evicted"  // admitted once, evicted (preempted, pods not ready in time), waiting again
	ReasonAdmitted = "Admitted" // admitted; resuming
)

// QueueReasons are the reasons a Queue gives.
var QueueReasons = []string{ReasonQueued, ReasonEvicted, ReasonAdmitted}

// Queue is what a queueing system says of a job that waits for it (operator/kueue plugs in
// Kueue's Workloads here).
type Queue interface {
	// Wait says why job, of kind k, is suspended in the queue: the reason (one of
	// QueueReasons, for the Suspended condition) and the message a user reads, which names the queue and what it
	// waits on.
	Wait(ctx context.Context, k *v1beta1.Kind, job v1beta1.Job) (reason, message string, err error)
	// Object is the queue's own object for a job (a Workload), which the job owns: the engine
	// watches it so that a change of the queue's verdict is shown at once.
	Object() client.Object
}

// queued is what the pass knows of the queue a job waits in.
type queued struct {
	name            string // the LocalQueue
	reason, message string
}

// observeQueue reads the queue's word on a job with a queue label; nil for a job without one,
// and, without Kueue's integration, for one whose runPolicy.suspend its user set.
func (e *Reconciler) observeQueue(ctx context.Context, job v1beta1.Job) (*queued, error) {
	name := job.GetLabels()[QueueLabel]
	if name == "" {
		return nil, nil
	}
	q := &queued{name: name}
	if e.Queue == nil && job.Policy().Suspend != nil {
		return nil, nil // the user's own suspend or resume: nothing waits for Kueue
	}
	if e.Queue == nil {
		q.reason = ReasonQueued
		q.message = fmt.Sprintf("labelled for Kueue's LocalQueue %q (%s), but this operator runs without its Kueue integration (--kueue), so nothing admits the job: "+
			"remove the label, or set runPolicy.suspend: false to run it without Kueue", name, QueueLabel)
		return q, nil
	}
	var err error
	q.reason, q.message, err = e.Queue.Wait(ctx, e.Framework.Kind(), job)
	return q, err
}

// heldForQueue is a job that waits for Kueue before its first admission: queued, and
// runPolicy.suspend unset.
func heldForQueue(p *pass) bool { return p.queue != nil && p.policy.Suspend == nil }
