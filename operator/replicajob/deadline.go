package replicajob

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// deadlineExceeded is true once activeDeadlineSeconds have passed since the job started.
func deadlineExceeded(status *v1beta1.JobStatus, policy v1beta1.RunPolicy, now metav1.Time) (bool, string) {
	if policy.ActiveDeadlineSeconds == nil || status.StartTime == nil {
		return false, ""
	}
	deadline := status.StartTime.Add(time.Duration(*policy.ActiveDeadlineSeconds) * time.Second)
	if now.Time.Before(deadline) {
		return false, ""
	}
	return true, fmt.Sprintf("the job ran longer than activeDeadlineSeconds (%ds); its running pods are stopped", *policy.ActiveDeadlineSeconds)
}

// deadlineLeft is when to look again so the deadline is enforced on time; 0 when there is none.
func deadlineLeft(status *v1beta1.JobStatus, policy v1beta1.RunPolicy, now metav1.Time) time.Duration {
	if policy.ActiveDeadlineSeconds == nil || status.StartTime == nil {
		return 0
	}
	left := status.StartTime.Add(time.Duration(*policy.ActiveDeadlineSeconds) * time.Second).Sub(now.Time)
	if left <= 0 {
		return time.Millisecond
	}
	return left
}
