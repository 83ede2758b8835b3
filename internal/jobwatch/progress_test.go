package jobwatch

import (
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What the trainers did not report is left out, never shown as 0; the percent goes with the
// count it comes from.
func TestProgressWords(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	pct := func(v int32) *int32 { return &v }
	secs := int64(200)
	for _, tc := range []struct {
		name string
		p    *v1beta1.JobProgress
		want string
	}{
		{"none reported", nil, ""},
		{"a step alone", &v1beta1.JobProgress{Step: 120}, "step 120"},
		{"steps of a total", &v1beta1.JobProgress{Step: 120, TotalSteps: n(1000), Percent: pct(12), Remaining: "3m20s"},
			"step 120/1000 (12%) | ~3m20s left"},
		{"epochs of a total", &v1beta1.JobProgress{Step: 40, Epoch: n(2), TotalEpochs: n(10), Percent: pct(20)},
			"step 40 | epoch 2/10 (20%)"},
		{"both totals: the steps'", &v1beta1.JobProgress{Step: 500, TotalSteps: n(1000), Epoch: n(5), TotalEpochs: n(10), Percent: pct(50)},
			"step 500/1000 (50%) | epoch 5/10"},
		{"the seconds left alone", &v1beta1.JobProgress{Step: 1, RemainingSeconds: &secs}, "step 1 | ~3m20s left"},
	} {
		if got := strings.Join(ProgressWords(tc.p), " | "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	p := &v1beta1.JobProgress{Metrics: []v1beta1.Metric{{Name: "loss", Value: "0.4213"}, {Name: "accuracy", Value: "NaN"}}}
	if got := strings.Join(MetricWords(p), ", "); got != "loss 0.4213, accuracy NaN" {
		t.Errorf("metrics: %q", got)
	}
	if MetricWords(nil) != nil {
		t.Error("metrics of no report")
	}
}

// Only a Progressing condition False for the deadline is a stall; False because the job ended
// is not.
func TestStalled(t *testing.T) {
	if !Stalled(v1beta1.JobProgressing, "False", ReasonStalled) {
		t.Error("the deadline passed: not stalled")
	}
	for _, c := range [][3]string{
		{v1beta1.JobProgressing, "True", "Reporting"},
		{v1beta1.JobProgressing, "False", "JobSucceeded"},
		{v1beta1.JobRunning, "False", ReasonStalled},
	} {
		if Stalled(c[0], c[1], c[2]) {
			t.Errorf("%v: stalled", c)
		}
	}
}
