package jobwatch

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// ReasonStalled is the reason of the Progressing condition once runPolicy.progressDeadlineSeconds
// passed without a larger step (v1beta1.JobProgressing): the job stalled. Progressing is False
// for other reasons too (a job that ended), which are no stall.
const ReasonStalled = "ProgressDeadlineExceeded"

// Stalled says whether a condition of a job, by its type, status and reason, says the job stalled.
// devctl's conditions and the dashboard's rows are of different types, hence the strings.
func Stalled(typ, status, reason string) bool {
	return typ == v1beta1.JobProgressing && status == "False" && reason == ReasonStalled
}

// ProgressWords is how far the trainers are, as parts the caller joins in its own layout: the
// step ("step 120/1000"), the epoch when they count them ("epoch 2/10"), the percent after the
// count it comes from ("step 120/1000 (12%)"), and the operator's estimate of the time left
// ("~3m20s left"). None for a job whose trainers never reported: a field they did not report is
// left out, never shown as 0.
func ProgressWords(p *v1beta1.JobProgress) []string {
	if p == nil {
		return nil
	}
	step := "step " + count(p.Step, p.TotalSteps)
	var epoch string
	if p.Epoch != nil {
		epoch = "epoch " + count(*p.Epoch, p.TotalEpochs)
	}
	if p.Percent != nil {
		// The operator takes the percent from the steps when their total is known, else from
		// the epochs.
		pct := fmt.Sprintf(" (%d%%)", *p.Percent)
		if p.TotalSteps == nil && p.TotalEpochs != nil && epoch != "" {
			epoch += pct
		} else {
			step += pct
		}
	}
	words := []string{step}
	if epoch != "" {
		words = append(words, epoch)
	}
	if left := ProgressLeft(p); left != "" {
		words = append(words, left)
	}
	return words
}

func count(n int64, total *int64) string {
	if total == nil {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d/%d", n, *total)
}

// ProgressLeft is the operator's estimate of the time left, "~3m20s left"; "" until it can tell.
func ProgressLeft(p *v1beta1.JobProgress) string {
	switch {
	case p == nil:
		return ""
	case p.Remaining != "":
		return "~" + p.Remaining + " left"
	case p.RemainingSeconds != nil:
		return "~" + duration.HumanDuration(time.Duration(*p.RemainingSeconds)*time.Second) + " left"
	}
	return ""
}

// MetricWords is each metric of the last report as "name value", in the order the trainer sent
// them.
func MetricWords(p *v1beta1.JobProgress) []string {
	if p == nil {
		return nil
	}
	words := make([]string, 0, len(p.Metrics))
	for _, m := range p.Metrics {
		words = append(words, m.Name+" "+m.Value)
	}
	return words
}
