package progress

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// WriteEvery is how often, at most, the reports of one job reach its status: whatever its
// trainers send, the operator writes a job's status for them once per WriteEvery.
const WriteEvery = 10 * time.Second

// rateWindow is how far back the step rate is measured: long enough to smooth a step's jitter,
// short enough to follow a run that speeds up or slows down.
const rateWindow = 5 * time.Minute

// forgetAfter is how long a job's reports are kept without a new one; its status keeps them.
// The board looks for such jobs once per forgetEvery, not at every report: at a thousand jobs
// reporting every second, a walk of every job per report was a third of the endpoint's CPU.
const (
	forgetAfter = time.Hour
	forgetEvery = time.Minute
)

// sampleEvery spaces the samples the rate is measured from: a job keeps about
// rateWindow/sampleEvery of them, whatever its trainers' pace, not one per report.
const sampleEvery = 10 * time.Second

// Board is what the operator remembers of each job's reports, by the job's UID. It is safe for
// concurrent use: the endpoint records, the engine reads.
type Board struct {
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Poke asks for the job to be reconciled, at most once per WriteEvery: its status then
	// takes the reports in.
	Poke func(job JobRef, after time.Duration)

	mu     sync.Mutex
	jobs   map[types.UID]*board
	forgot time.Time // when forget last looked
}

// JobRef names a job.
type JobRef struct {
	Kind            *v1beta1.Kind
	Namespace, Name string
	UID             types.UID
}

// board is one job's reports.
type board struct {
	last     Report
	replica  string
	at       time.Time
	advanced time.Time // when the step last grew
	samples  []sample  // (time, step) of recent reports, oldest first, for the rate
	poked    time.Time // when the last reconcile asked for is, or was, due
}

type sample struct {
	at          time.Time
	step, epoch int64
}

func (b *Board) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Record takes one report from pod replica of job.
func (b *Board) Record(job JobRef, replica string, r Report) {
	now := b.now()
	b.mu.Lock()
	if b.jobs == nil {
		b.jobs = map[types.UID]*board{}
	}
	j := b.jobs[job.UID]
	if j == nil {
		j = &board{}
		b.jobs[job.UID] = j
	}
	if j.at.IsZero() || r.Step > j.last.Step {
		j.advanced = now
	}
	if !j.at.IsZero() && r.Step < j.last.Step {
		j.samples = nil // started again (a restart from an earlier checkpoint): a new rate
	}
	j.last, j.replica, j.at = r, replica, now
	j.samples = addSample(trim(j.samples, now), sample{at: now, step: r.Step, epoch: deref(r.Epoch)})
	wait, poke := j.schedule(now)
	b.forget(now)
	b.mu.Unlock()
	if poke && b.Poke != nil {
		b.Poke(job, wait)
	}
}

// schedule says whether to ask for a reconcile, and in how long: now when none was asked for
// in the last WriteEvery, else once at the end of that WriteEvery (so the last report of a burst
// is written too); not when one is asked for already.
func (j *board) schedule(now time.Time) (time.Duration, bool) {
	switch next := j.poked.Add(WriteEvery); {
	case !now.Before(next):
		j.poked = now
		return 0, true
	case j.poked.After(now):
		return 0, false // asked for already, for later
	default:
		j.poked = next
		return next.Sub(now), true
	}
}

// addSample adds s as the newest sample; the one it replaces as newest stays only when it is
// sampleEvery after the one before it.
func addSample(samples []sample, s sample) []sample {
	if n := len(samples); n >= 2 && samples[n-1].at.Sub(samples[n-2].at) < sampleEvery {
		samples[n-1] = s
		return samples
	}
	return append(samples, s)
}

// trim keeps the samples of the rate window, and always the newest.
func trim(s []sample, now time.Time) []sample {
	i := 0
	for i < len(s)-1 && now.Sub(s[i].at) > rateWindow {
		i++
	}
	return append(s[:0], s[i:]...)
}

// forget drops the jobs that have not reported for forgetAfter. Called with mu held.
func (b *Board) forget(now time.Time) {
	if now.Sub(b.forgot) < forgetEvery {
		return
	}
	b.forgot = now
	for uid, j := range b.jobs {
		if now.Sub(j.at) > forgetAfter {
			delete(b.jobs, uid)
		}
	}
}

// Latest is job uid's progress as last reported, merged with what its status already holds
// (prev; after an operator restart the board knows nothing yet). ok is false when neither has any.
func (b *Board) Latest(uid types.UID, prev *v1beta1.JobProgress) (*v1beta1.JobProgress, bool) {
	b.mu.Lock()
	j, ok := b.jobs[uid]
	var snap board
	if ok {
		snap = *j
		snap.samples = append([]sample(nil), j.samples...)
	}
	b.mu.Unlock()
	if !ok || (prev != nil && !snap.at.After(prev.ReportTime.Time)) {
		return prev, prev != nil
	}
	return status(snap), true
}

// status is a job's status.progress from its board.
func status(j board) *v1beta1.JobProgress {
	r := j.last
	p := &v1beta1.JobProgress{
		Step:       r.Step,
		TotalSteps: r.TotalSteps, Epoch: r.Epoch, TotalEpochs: r.TotalEpochs,
		Replica:     j.replica,
		ReportTime:  metav1.NewTime(j.at.Truncate(time.Second)),
		AdvanceTime: ptr(metav1.NewTime(j.advanced.Truncate(time.Second))),
	}
	for _, m := range r.Metrics {
		p.Metrics = append(p.Metrics, v1beta1.Metric{Name: m.Name, Value: FormatValue(m.Value)})
	}
	done, total, rate := fraction(r), float64(0), 0.0
	switch {
	case r.TotalSteps != nil:
		total, rate = float64(*r.TotalSteps), stepRate(j.samples, func(s sample) int64 { return s.step })
	case r.TotalEpochs != nil && r.Epoch != nil:
		total, rate = float64(*r.TotalEpochs), stepRate(j.samples, func(s sample) int64 { return s.epoch })
	}
	if done >= 0 {
		p.Percent = ptr(int32(math.Floor(done * 100)))
		p.Summary = fmt.Sprintf("%d%%", *p.Percent)
	} else {
		p.Summary = fmt.Sprintf("step %d", r.Step)
	}
	if rate := stepRate(j.samples, func(s sample) int64 { return s.step }); rate > 0 {
		p.StepsPerSecond = strconv.FormatFloat(rate, 'g', 3, 64)
	}
	if rate > 0 && done >= 0 {
		left := int64(math.Ceil((1 - done) * total / rate))
		p.RemainingSeconds = &left
		p.Remaining = Duration(time.Duration(left) * time.Second)
	}
	return p
}

// fraction is how much of the run is done, 0-1; -1 when no total is known.
func fraction(r Report) float64 {
	switch {
	case r.TotalSteps != nil && *r.TotalSteps > 0:
		return float64(r.Step) / float64(*r.TotalSteps)
	case r.TotalSteps != nil:
		return 1
	case r.TotalEpochs != nil && r.Epoch != nil && *r.TotalEpochs > 0:
		return float64(*r.Epoch) / float64(*r.TotalEpochs)
	}
	return -1
}

// stepRate is the rate of what of (the step or the epoch) over the samples, per second; 0 until
// two samples a second apart tell it.
func stepRate(s []sample, of func(sample) int64) float64 {
	if len(s) < 2 {
		return 0
	}
	first, last := s[0], s[len(s)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt < 1 || of(last) <= of(first) {
		return 0
	}
	return float64(of(last)-of(first)) / dt
}

// Advanced is when job uid's step last grew, as the board saw it; zero when it has no report.
func (b *Board) Advanced(uid types.UID) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j := b.jobs[uid]; j != nil {
		return j.advanced
	}
	return time.Time{}
}

// Duration writes d for people, to the minute past an hour: 45s, 3m20s, 1h12m, 2d4h.
func Duration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
