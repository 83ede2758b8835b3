package replicajob

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// expiry says whether a finished job's ttlSecondsAfterFinished have passed since it ended, or
// else how long until they have; 0 when it has none.
func expiry(status *v1beta1.JobStatus, policy v1beta1.RunPolicy, now metav1.Time) (bool, time.Duration) {
	if policy.TTLSecondsAfterFinished == nil || status.CompletionTime == nil {
		return false, 0
	}
	at := status.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second)
	if left := at.Sub(now.Time); left > 0 {
		return false, left
	}
	return true, 0
}

// expire deletes a job whose ttlSecondsAfterFinished have passed.
func (e *Reconciler) expire(ctx context.Context, job client.Object) error {
	// Background propagation: the job goes at once, the garbage collector takes what it owns.
	err := e.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting job after ttlSecondsAfterFinished: %w", err)
	}
	return nil
}
