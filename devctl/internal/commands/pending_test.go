package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A job whose replicas cannot pull their image: run says why once, for all of them, however
// often the kubelet retries; --pending-timeout gives up on it with the reason and exit 1, and
// --rm deletes it.
func TestRunGivesUpOnAWaitingJob(t *testing.T) {
	ns := envtest(t)
	startOperator(t, ns)
	file := writeJob(t, t.TempDir(), "small.yaml", fmt.Sprintf(smallJob, "1ms"))
	var out, status syncBuffer
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- Run(context.Background(), RunOptions{File: file, Namespace: ns, Rm: true, PendingTimeout: 3 * time.Second, Timeout: time.Minute}, &out, &status)
	}()
	pods := []string{"small-master-0", "small-worker-0", "small-worker-1"}
	eventually(t, "the job's pods", func() error {
		for _, p := range pods {
			var pod corev1.Pod
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: p}, &pod); err != nil {
				return err
			}
		}
		return nil
	})
	pull := `failed to pull and unpack image "mlkube/trainer:test": not found`
	// The kubelet's retries, a moment apart for each replica, alternating as it does.
	for retry := range 4 {
		for _, p := range pods {
			setPod(t, ns, p, func(pod *corev1.Pod) {
				w := &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: pull}
				if retry%2 == 1 {
					w = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "mlkube/trainer:test": ErrImagePull: ` + pull}
				}
				pod.Status.Phase = corev1.PodPending
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "tensorflow", Image: "mlkube/trainer:test", State: corev1.ContainerState{Waiting: w}}}
			})
		}
		time.Sleep(300 * time.Millisecond)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("run did not give up; status:\n%s", status.String())
	}
	if ExitCode(err) != ExitFailed {
		t.Fatalf("exit %d (%v), want %d; status:\n%s", ExitCode(err), err, ExitFailed, status.String())
	}
	why := "master-0, worker-0..1: cannot pull mlkube/trainer:test: " + pull
	if !strings.Contains(err.Error(), "waited 3s on ImagePullBackOff") || !strings.Contains(err.Error(), why) {
		t.Errorf("error %q, want the wait, the reason and %q", err, why)
	}
	if n := strings.Count(status.String(), "cannot pull"); n != 1 {
		t.Errorf("the reason said %d times, want once:\n%s", n, status.String())
	}
	if !strings.Contains(status.String(), "deleted tfjob/small (--rm)") || getJob(t, ns, "small") != nil && getJob(t, ns, "small").DeletionTimestamp == nil {
		t.Errorf("--rm did not delete the job given up on:\n%s", status.String())
	}
	t.Logf("gave up after %.1fs:\n%s", time.Since(start).Seconds(), status.String())
}
