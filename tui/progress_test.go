package tui_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/tui/internal/kube"
	"github.com/mlkube/mlkube/tui/internal/ui"
)

func int64p(v int64) *int64 { return &v }

// progressJobs are docJobs and three jobs whose status tells more: bert's trainers report,
// gpt's stalled, and mnist-bad failed on its worker 1 first.
func progressJobs() []any {
	pct := int32(12)
	bert := job("bert", "Running", "chief 1/1 worker 4/4", 0, 20*time.Minute)
	bert.Progress = &v1beta1.JobProgress{Step: 120, TotalSteps: int64p(1000), Percent: &pct, Epoch: int64p(1), TotalEpochs: int64p(10),
		Metrics: []v1beta1.Metric{{Name: "loss", Value: "0.4213"}, {Name: "accuracy", Value: "0.8812"}, {Name: "learning_rate", Value: "0.001"}},
		Replica: "bert-chief-0", ReportTime: metav1.NewTime(t0.Add(-12 * time.Second)), StepsPerSecond: "4.5",
		RemainingSeconds: int64p(200), Summary: "12%", Remaining: "3m20s"}

	gpt := job("gpt", "Running", "worker 2/2", 1, time.Hour,
		kube.Condition{Type: v1beta1.JobProgressing, Status: "False", Reason: jobwatch.ReasonStalled,
			Message: "no larger step than 340 for 10m (progressDeadlineSeconds 600): restarting every replica (restart 1 of backoffLimit 3)"})
	gpt.Progress = &v1beta1.JobProgress{Step: 340, Metrics: []v1beta1.Metric{{Name: "loss", Value: "NaN"}},
		Replica: "gpt-worker-1", ReportTime: metav1.NewTime(t0.Add(-11 * time.Minute)), Summary: "step 340"}
	gpt.Stalls = 1

	code := int32(1)
	bad := job("mnist-bad", "Failed", "master 0/1 worker 0/2 ps 0/2", 0, 95*time.Second,
		kube.Condition{Type: "Failed", Status: "True", Reason: "ExitCode", Message: "pod mnist-bad-worker-1 exited with code 1 (Error; permanent: 1-127): the job failed"})
	bad.FirstFailure = &v1beta1.ReplicaFailure{Replica: "worker 1", Pod: "mnist-bad-worker-1", Node: "kind-worker2", ExitCode: &code,
		Reason: "Error", Judged: "permanent: 1-127", FinishedAt: &metav1.Time{Time: t0.Add(-30 * time.Second)},
		LastWords: "[...]\nstep 40 loss=0.7\nTraceback (most recent call last):\n  File \"/app/train.py\", line 88, in <module>\n\tmain()\n" +
			"  File \"/app/train.py\", line 80, in main\nRuntimeError: CUDA error: out of memory\n"}

	msgs := docJobs()
	for _, j := range []*kube.Job{bert, gpt, bad} {
		msgs = append(msgs, kube.JobUpserted{Job: j})
	}
	return msgs
}

// The list's PROGRESS is status.progress.summary, "stalled" after it while the job is; nothing
// for a job whose trainers never reported.
func TestViewJobListProgress(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, progressJobs()...))
	requireScreen(t, m)
	for name, want := range map[string]string{"bert": " 12% ", "gpt": " step 340 stalled "} {
		if l := lineWith(screen(m), " "+name+" "); !strings.Contains(l, want) {
			t.Errorf("%s's row %q lacks %q", name, l, want)
		}
	}
	if f := strings.Fields(lineWith(screen(m), " mnist-done ")); len(f) < 2 || f[len(f)-2] != "0" || strings.Contains(f[len(f)-3], "%") {
		t.Errorf("mnist-done reported nothing, yet its PROGRESS shows: %q", f)
	}
}

// A reporting job's view: where its trainers are, every metric, and how long ago they said so.
func TestViewProgress(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, progressJobs()...), key("enter"), // bert, the first by name
		at(0, kube.ReplicaUpserted{Watch: 1, Replica: replica("bert", "chief", 0, "Running", 20*time.Minute)}, kube.ReplicasSynced{Watch: 1}))
	requireScreen(t, m)
	for _, want := range []string{"step 120/1000 (12%) · epoch 1/10 · ~3m20s left", "loss 0.4213 · accuracy 0.8812 · learning_rate 0.001",
		"reported 12s ago · by bert-chief-0 · 4.5 steps/s"} {
		if !strings.Contains(screen(m), want) {
			t.Errorf("no %q on screen", want)
		}
	}
}

// A stalled job's progress stands out in the warning style, with the condition's message.
func TestViewStalled(t *testing.T) {
	msgs := []any{at(0, progressJobs()...), key("j"), key("enter"), // gpt
		at(0, kube.ReplicaUpserted{Watch: 1, Replica: replica("gpt", "worker", 0, "Running", time.Hour)}, kube.ReplicasSynced{Watch: 1})}
	m := run(t, newModel(target), 80, 24, msgs...)
	requireScreen(t, m)
	if !strings.Contains(screen(m), "stalled: no larger step than 340") {
		t.Error("the stall's message is not on screen")
	}
	coloured := run(t, colouredModel(), 80, 24, msgs...)
	warn := "\x1b[38;2;255;175;0m" // styles.warn, as for a Waiting job's state
	if l := lineWith(coloured.View().Content, "step 340"); !strings.Contains(l, warn+"step 340") {
		t.Errorf("the stalled progress is not in the warning style: %q", l)
	}
}

// A failed job's view names the replica that failed first, where it ran, how it exited, and
// the end of its last words.
func TestViewFirstFailure(t *testing.T) {
	m := run(t, newModel(target), 80, 24, at(0, progressJobs()...), keys("jjj"), key("enter"), // mnist-bad
		at(0, kube.ReplicaUpserted{Watch: 1, Replica: replica("mnist-bad", "worker", 1, "Failed", 95*time.Second)}, kube.ReplicasSynced{Watch: 1}))
	requireScreen(t, m)
	for _, want := range []string{"worker 1 · pod mnist-bad-worker-1 · node kind-worker2", "exit code 1 (Error; permanent: 1-127)",
		"last words (the last 5 of 7 lines):", "RuntimeError: CUDA error: out of memory"} {
		if !strings.Contains(screen(m), want) {
			t.Errorf("no %q on screen", want)
		}
	}
}

func colouredModel() ui.Model {
	return ui.New(ui.Config{Target: target, Kinds: kube.Kinds, Now: t0, FrozenClock: true})
}

func lineWith(s, text string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, text) {
			return l
		}
	}
	return ""
}
