package progress

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestDecode(t *testing.T) {
	r, err := Decode([]byte(`{"metrics": {"loss": NaN, "gain": -Infinity, "acc": 0.25, "lr": "Inf"}, "step": 7, "totalSteps": 9, "epoch": 1, "totalEpochs": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Step != 7 || *r.TotalSteps != 9 || *r.Epoch != 1 || *r.TotalEpochs != 2 || len(r.Metrics) != 4 {
		t.Fatalf("%+v", r)
	}
	names := []string{r.Metrics[0].Name, r.Metrics[1].Name, r.Metrics[2].Name, r.Metrics[3].Name}
	if strings.Join(names, ",") != "loss,gain,acc,lr" {
		t.Errorf("metrics in the order %v, want the order sent", names)
	}
	if !math.IsNaN(r.Metrics[0].Value) || !math.IsInf(r.Metrics[1].Value, -1) || r.Metrics[2].Value != 0.25 || !math.IsInf(r.Metrics[3].Value, 1) {
		t.Errorf("values %+v", r.Metrics)
	}
	// A string that merely contains NaN stays a string.
	if _, err := Decode([]byte(`{"step": 1, "metrics": {"x": "NaN is not a number"}}`)); err == nil {
		t.Error("a metric whose value is a sentence was taken")
	}
	for body, says := range map[string]string{
		`{}`:                                  `"step" is missing`,
		`{"step": -1}`:                        "from 0 to",
		`{"step": 1.5}`:                       "from 0 to",
		`{"step": 5, "totalSteps": 4}`:        "past totalSteps",
		`{"step": 1, "step": 2}`:              "given twice",
		`{"step": 1} {"step": 2}`:             "nothing after it",
		`{"step": 1`:                          "ends before",
		`[1]`:                                 "expected a JSON object",
		`{"step": 1, "metrics": {"a b": 1}}`:  `metric name "a b"`,
		`{"step": 1, "metrics": {"a": true}}`: "not true",
	} {
		if _, err := Decode([]byte(body)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want an error saying %q", body, err, says)
		}
	}
}

// FuzzDecode: whatever a trainer sends, Decode answers without panicking, and what it takes
// holds to the limits: no more metrics than MaxMetrics, names of the allowed form, and a body
// that, quoted back, decodes to the same report.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"step": 1}`, `{"step": 120, "totalSteps": 1000, "metrics": {"loss": NaN, "acc": 0.5}}`,
		`{"step": 3, "epoch": 1, "totalEpochs": 2, "metrics": {"x": -Infinity, "y": "Inf"}}`,
		`{"step": "1"}`, `{"metrics": {"a\"NaN": 1}, "step": 2}`, `NaN`, `{"step": 1e3}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Decode(body)
		if err != nil {
			return
		}
		if len(r.Metrics) > MaxMetrics || r.Step < 0 {
			t.Fatalf("took %+v", r)
		}
		again := map[string]any{"step": r.Step}
		metrics := map[string]any{}
		for _, m := range r.Metrics {
			if !metricName.MatchString(m.Name) {
				t.Fatalf("took metric name %q", m.Name)
			}
			metrics[m.Name] = m.Value
			if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
				metrics[m.Name] = FormatValue(m.Value)
			}
		}
		again["metrics"] = metrics
		b, _ := json.Marshal(again)
		back, err := Decode(b)
		if err != nil || back.Step != r.Step || len(back.Metrics) != len(r.Metrics) {
			t.Fatalf("%s decoded as %+v, which written back as %s reads %+v, %v", body, r, b, back, err)
		}
	})
}

// The time left comes from the step rate of the last reports.
func TestBoardEstimatesTimeLeft(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &Board{Now: func() time.Time { return now }}
	job := JobRef{UID: types.UID("u")}
	total := int64(1000)
	for step := int64(100); step <= 200; step += 10 {
		b.Record(job, "pod-0", Report{Step: step, TotalSteps: &total})
		now = now.Add(5 * time.Second) // 2 steps a second
	}
	p, ok := b.Latest("u", nil)
	if !ok || p.Step != 200 || *p.Percent != 20 || p.Summary != "20%" || p.StepsPerSecond != "2" {
		t.Fatalf("%+v", p)
	}
	if *p.RemainingSeconds != 400 || p.Remaining != "6m40s" {
		t.Errorf("remaining %d (%s), want 400 s: 800 steps at 2 a second", *p.RemainingSeconds, p.Remaining)
	}
	// A restart from an earlier checkpoint starts a new rate; the step did not grow.
	advanced := b.Advanced("u")
	now = now.Add(time.Second)
	b.Record(job, "pod-0", Report{Step: 20, TotalSteps: &total})
	if p, _ := b.Latest("u", nil); p.RemainingSeconds != nil || !b.Advanced("u").Equal(advanced) {
		t.Errorf("after a restart at step 20: remaining %v, advanced moved to %v", p.RemainingSeconds, b.Advanced("u"))
	}
}

// A job keeps a sample per sampleEvery, not one per report: a thousand jobs reporting every
// second for the rate's whole window would hold 300 each.
func TestBoardKeepsFewSamples(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &Board{Now: func() time.Time { return now }}
	total := int64(100000)
	for step := range int64(600) { // a report a second for 10 minutes
		b.Record(JobRef{UID: "u"}, "p", Report{Step: step, TotalSteps: &total})
		now = now.Add(time.Second)
	}
	j := b.jobs["u"]
	if n := len(j.samples); n > int(rateWindow/sampleEvery)+2 {
		t.Errorf("%d samples kept, want at most %d", n, int(rateWindow/sampleEvery)+2)
	}
	if p, _ := b.Latest("u", nil); p.StepsPerSecond != "1" {
		t.Errorf("rate %s steps/s, want 1", p.StepsPerSecond)
	}
}

// Reports of one job ask for a reconcile at once, then once at the end of each WriteEvery.
func TestBoardPokesOncePerWriteEvery(t *testing.T) {
	now := time.Unix(1000, 0)
	var pokes []time.Duration
	b := &Board{Now: func() time.Time { return now }, Poke: func(_ JobRef, after time.Duration) { pokes = append(pokes, after) }}
	for i := range 25 { // a report a second for 25 s
		b.Record(JobRef{UID: "u"}, "p", Report{Step: int64(i)})
		now = now.Add(time.Second)
	}
	// t=0 at once; t=1 asks for t=10; t=10, as that one fires, for t=20; t=20 for t=30.
	want := []time.Duration{0, 9 * time.Second, 10 * time.Second, 10 * time.Second}
	if len(pokes) != len(want) {
		t.Fatalf("pokes %v, want %v", pokes, want)
	}
	for i := range want {
		if pokes[i] != want[i] {
			t.Errorf("pokes %v, want %v", pokes, want)
		}
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{45 * time.Second: "45s", 200 * time.Second: "3m20s", 72 * time.Minute: "1h12m", 52 * time.Hour: "2d4h"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %s, want %s", d, got, want)
		}
	}
}
