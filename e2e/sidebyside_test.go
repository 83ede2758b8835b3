//go:build e2e

package e2e

import "testing"

// TestSideBySide runs the tests whose jobs keep to a namespace of their own and that measure no
// time, at once (four at a time, make e2e's -parallel): each mostly waits on its pods, and one
// after another they took two minutes of the suite while the cluster's 2 cores were three
// quarters idle. Run one with -run 'TestSideBySide/<name>'.
//
// Not here: tests that change what the whole cluster sees (TestUp, TestNodeprobe, TestHelmChart,
// TestKueue); tests that record how long something took (the samples' runs,
// TestStartupAgainstPlainPods, TestRunWithTensorBoard, TestRunLoadsYourOwnImage); and
// TestDashboard, which reads a terminal in tmux against deadlines, its subtests in order.
func TestSideBySide(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"ImageNobodyHas", imageNobodyHas},
		{"SuspendAndResume", suspendAndResume},
		{"ReadmeYourOwnTrainer", readmeYourOwnTrainer},
		{"LogsPreviousAfterAnInPlaceRestart", logsPreviousAfterAnInPlaceRestart},
		{"RetryableFailure", retryableFailure},
		{"ALegacyMXJob", aLegacyMXJob},
		{"ALegacyManifest", aLegacyManifest},
		{"LogsAfterTheJobEnded", logsAfterTheJobEnded},
		{"ActiveDeadline", activeDeadline},
		{"PermanentFailure", permanentFailure},
		{"BackoffLimitExceeded", backoffLimitExceeded},
		{"NameClash", nameClash},
		{"RefusedPod", refusedPod},
		{"AnInvalidJob", anInvalidJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t)
		})
	}
}
