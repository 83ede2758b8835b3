package replicajob

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// decide works out, from what the pass observed, what the job's status says next and what is to
// be deleted or created. It makes no request and records no event, so what a pass decides reads
// apart from what the apiserver answers; acting on it is act's (act.go).
func (e *Reconciler) decide(p *pass) {
	if p.unreadable != "" {
		sayUnreadable(p)
		return
	}
	s := p.status
	if s.StartTime == nil {
		s.StartTime = &p.now
	}
	clearUnreadable(s, p.now)
	switch {
	case p.invalid != nil:
		p.failNow("InvalidSpec", p.invalid.Error())
		return
	case !finished(s) && (p.policy.Suspended() || heldForQueue(p)):
		e.suspend(p)
		return
	case !finished(s) && meta.IsStatusConditionTrue(s.Conditions, v1beta1.JobSuspended) && !resume(p):
		return
	}
	// The reports so far, before the outcome: a stall is told with the last step reported.
	e.takeProgress(p)
	var stallLeft, settling time.Duration
	if !finished(s) {
		var evs []event
		evs, settling = e.decideOutcome(p.job, p.mem, p.replicas, p.policy, s, p.now)
		p.events = append(p.events, evs...)
	}
	if settling > 0 {
		// A failure waits for its peers' to come in (firstfailure.go): until it is judged, the
		// job shows nothing new and nothing is created.
		p.result.RequeueAfter = settling
		return
	}
	if !finished(s) && len(p.events) == 0 {
		// Only in a pass that decided nothing else: a restart just counted is not a stall.
		var evs []event
		evs, stallLeft = e.stall(p.job.GetUID(), p.replicas, p.policy, s, p.now)
		p.events = append(p.events, evs...)
	}
	// Every decision comes with an event; without one, nothing needs writing before acting.
	p.commit = len(p.events) > 0
	p.reporting = true
	// While a refused create waits for its next try, nothing is created: a quota that refuses
	// a pod would refuse it again on every pod event.
	p.waiting = p.mem.wait(p.now.Time)
	if finished(s) {
		p.doomed, p.cleaning = e.cleanUp(s, p.policy, p.pods, p.services)
		p.expired, p.result.RequeueAfter = expiry(s, p.policy, p.now)
		return
	}
	p.doomed = restarts(p.replicas, s)
	p.result.RequeueAfter = soonest(soonest(deadlineLeft(s, p.policy, p.now), stallLeft), settling)
	p.create = p.waiting == 0
}

// failNow ends the job at once for a reason no retry can fix: the status says why, as it is
// (nothing else of the pass goes into it), and so does an event.
func (p *pass) failNow(reason, msg string) {
	fail(p.status, reason, msg, p.now)
	p.events = append(p.events, event{kind: corev1.EventTypeWarning, reason: reason, action: "Create", note: msg})
	// Reconciled again by its own status write: clean-up goes on from there.
	p.reporting, p.result = false, reconcile.Result{}
}
