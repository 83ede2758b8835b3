package replicajob

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The operator's job metrics, served with controller-runtime's on its metrics endpoint
// (--metrics-bind-address). They count transitions of the stored status, seen where the
// operator writes it: a transition written once is counted once, whichever replica of the
// operator wrote it, and an operator that restarts does not count again what it finds written.
var (
	jobsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mlkube_jobs_created_total",
		Help: "Jobs whose pods and services were all created (condition Created turned true), by kind and namespace.",
	}, []string{"kind", "namespace"})
	jobsSucceeded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mlkube_jobs_succeeded_total",
		Help: "Jobs that succeeded, by kind and namespace.",
	}, []string{"kind", "namespace"})
	jobsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mlkube_jobs_failed_total",
		Help: "Jobs that failed, by kind, namespace and the Failed condition's reason (ExitCode, BackoffLimitExceeded, DeadlineExceeded, ...).",
	}, []string{"kind", "namespace", "reason"})
	jobsRestarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mlkube_job_restarts_total",
		Help: "Replica restarts counted against backoffLimit, by kind and namespace.",
	}, []string{"kind", "namespace"})
	jobStartSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mlkube_job_start_seconds",
		Help:    "Seconds from a job's creation to every replica running (phase Running), by kind and namespace.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
	}, []string{"kind", "namespace"})
	unreadableJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mlkube_jobs_unreadable",
		Help: "Jobs stored in a form this operator cannot decode whole (a number past its field's range, a field of another type), by kind and namespace: the operator acts on none of them until they are fixed or deleted.",
	}, []string{"kind", "namespace"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mlkube_reconcile_errors_total",
		Help: "Reconciles that returned an error, by kind and reason (the apiserver's status reason, e.g. Forbidden, or Unknown); a reconcile that met a stale cache (Conflict) is retried and not counted.",
	}, []string{"kind", "reason"})
)

func init() {
	metrics.Registry.MustRegister(jobsCreated, jobsSucceeded, jobsFailed, jobsRestarted, jobStartSeconds, unreadableJobs, reconcileErrors)
}

// countTransitions updates the metrics for a status write that took the job from old to new.
func countTransitions(kind, namespace string, created time.Time, old, new *v1beta1.JobStatus, now time.Time) {
	if !meta.IsStatusConditionTrue(old.Conditions, v1beta1.JobCreated) && meta.IsStatusConditionTrue(new.Conditions, v1beta1.JobCreated) {
		jobsCreated.WithLabelValues(kind, namespace).Inc()
	}
	if old.Phase != v1beta1.JobPhaseRunning && new.Phase == v1beta1.JobPhaseRunning {
		jobStartSeconds.WithLabelValues(kind, namespace).Observe(now.Sub(created).Seconds())
	}
	if d := new.Restarts - old.Restarts; d > 0 {
		jobsRestarted.WithLabelValues(kind, namespace).Add(float64(d))
	}
	if old.State != new.State {
		switch new.State {
		case v1beta1.JobStateSucceeded:
			jobsSucceeded.WithLabelValues(kind, namespace).Inc()
		case v1beta1.JobStateFailed:
			reason := "Unknown"
			if c := meta.FindStatusCondition(new.Conditions, v1beta1.JobFailed); c != nil {
				reason = c.Reason
			}
			jobsFailed.WithLabelValues(kind, namespace, reason).Inc()
		}
	}
}

// countError counts a reconcile's error by the apiserver's reason for it.
func countError(kind string, err error) {
	reason := "Unknown"
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		reason = string(status.Status().Reason)
	}
	reconcileErrors.WithLabelValues(kind, reason).Inc()
}
