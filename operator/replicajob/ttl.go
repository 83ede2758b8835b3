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

// expire deletes a finished job once ttlSecondsAfterFinished have passed since it ended. It
// returns whether it deleted the job, or else how long until it should look again.
func (e *Reconciler) expire(ctx context.Context, job client.Object, status *v1beta1.JobStatus, policy v1beta1.RunPolicy, now metav1.Time) (bool, time.Duration, error) {
	if policy.TTLSecondsAfterFinished == nil || status.CompletionTime == nil {
		return false, 0, nil
	}
	expiry := status.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second)
	if left := expiry.Sub(now.Time); left > 0 {
		return false, left, nil
	}
	// Background propagation: the job goes at once, the garbage collector takes what it owns.
	err := e.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return false, 0, fmt.Errorf("deleting job after ttlSecondsAfterFinished: %w", err)
	}
	return true, 0, nil
}
