// Package progress takes the progress reports a job's trainers send and makes of them the job's
// status.progress: the report's format and limits (report.go), who may report (auth.go), the
// HTTPS endpoint the operator serves (server.go, certs.go), the namespaces' copies of its CA
// (trust.go), and what the operator remembers of each job's reports, the step rate and the time
// left among it (board.go). docs/progress.md is the user's side of it.
package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
)

// Limits of one report: past them a report is refused with the reason, and changes nothing.
const (
	MaxReportBytes = 4096
	MaxMetrics     = 16
	maxMetricName  = 64
)

// Report is one progress report, as a trainer sends it:
//
//	{"step": 120, "totalSteps": 1000, "epoch": 1, "totalEpochs": 3, "metrics": {"loss": 0.42}}
//
// Only step is required. Metrics keep the order they were sent in.
type Report struct {
	Step        int64
	TotalSteps  *int64
	Epoch       *int64
	TotalEpochs *int64
	Metrics     []Metric
}

// Metric is a named value; NaN and the infinities are kept: they are how a diverging run looks.
type Metric struct {
	Name  string
	Value float64
}

// metricName is what a metric may be called: what Prometheus and TensorBoard take, and '/'.
var metricName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:/-]*$`)

// Decode reads one report. The error says what is wrong in words a trainer's author can act on.
func Decode(body []byte) (Report, error) {
	if len(body) > MaxReportBytes {
		return Report{}, fmt.Errorf("the report is %d bytes, more than %d", len(body), MaxReportBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(quoteNonFinite(body)))
	dec.UseNumber()
	var r Report
	seen := map[string]bool{}
	err := object(dec, func(key string) error {
		if seen[key] {
			return fmt.Errorf("%q is given twice", key)
		}
		seen[key] = true
		switch key {
		case "step":
			return count(dec, key, &r.Step)
		case "totalSteps":
			return optionalCount(dec, key, &r.TotalSteps)
		case "epoch":
			return optionalCount(dec, key, &r.Epoch)
		case "totalEpochs":
			return optionalCount(dec, key, &r.TotalEpochs)
		case "metrics":
			return object(dec, func(name string) error { return r.addMetric(dec, name) })
		}
		return fmt.Errorf("unknown field %q: a report has step, totalSteps, epoch, totalEpochs and metrics", key)
	})
	if err != nil {
		return Report{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Report{}, errors.New("the report is one JSON object, with nothing after it")
	}
	if !seen["step"] {
		return Report{}, errors.New(`"step" is missing: a report says at least which step training is at`)
	}
	return r, r.check()
}

func (r *Report) addMetric(dec *json.Decoder, name string) error {
	switch {
	case len(r.Metrics) == MaxMetrics:
		return fmt.Errorf("more than %d metrics", MaxMetrics)
	case len(name) > maxMetricName || !metricName.MatchString(name):
		return fmt.Errorf("metric name %q: a name is 1-%d letters, digits, _ . : / or -, starting with a letter or _", truncate(name, maxMetricName), maxMetricName)
	}
	for _, m := range r.Metrics {
		if m.Name == name {
			return fmt.Errorf("metric %q is given twice", name)
		}
	}
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	v, ok := metricValue(tok)
	if !ok {
		return fmt.Errorf("metric %q: the value is a number (or NaN, Infinity, -Infinity), not %s", name, describe(tok))
	}
	r.Metrics = append(r.Metrics, Metric{Name: name, Value: v})
	return nil
}

func (r Report) check() error {
	if r.TotalSteps != nil && r.Step > *r.TotalSteps {
		return fmt.Errorf("step %d is past totalSteps %d", r.Step, *r.TotalSteps)
	}
	if r.Epoch != nil && r.TotalEpochs != nil && *r.Epoch > *r.TotalEpochs {
		return fmt.Errorf("epoch %d is past totalEpochs %d", *r.Epoch, *r.TotalEpochs)
	}
	return nil
}

// object reads one JSON object, calling field for each key with the decoder at its value.
func object(dec *json.Decoder, field func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("expected a JSON object, not %s", describe(tok))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		if err := field(tok.(string)); err != nil {
			return err
		}
	}
	_, err = dec.Token() // the closing brace
	return syntax(err)
}

func count(dec *json.Decoder, key string, to *int64) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	n, ok := tok.(json.Number)
	if !ok {
		return fmt.Errorf("%q is a whole number, not %s", key, describe(tok))
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is a whole number from 0 to %d, not %s", key, int64(math.MaxInt64), truncate(n.String(), 32))
	}
	*to = v
	return nil
}

func optionalCount(dec *json.Decoder, key string, to **int64) error {
	var v int64
	if err := count(dec, key, &v); err != nil {
		return err
	}
	*to = &v
	return nil
}

// nonFinite are the words Python's json module (and JavaScript's) writes for the floats JSON
// has no number for, which quoteNonFinite turns into strings.
var nonFinite = map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}

// metricValue reads a metric's value: a JSON number, or NaN and the infinities, bare as Python
// writes them or as strings ("NaN", "Inf", "-Inf" and their spellings ParseFloat knows).
func metricValue(tok json.Token) (float64, bool) {
	switch v := tok.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(v.String(), 64)
		return f, err == nil
	case string:
		if f, ok := nonFinite[v]; ok {
			return f, true
		}
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil && (math.IsNaN(f) || math.IsInf(f, 0))
	}
	return 0, false
}

// quoteNonFinite turns the bare words NaN, Infinity and -Infinity outside strings into strings,
// so that encoding/json reads what Python's json.dumps writes by default.
func quoteNonFinite(body []byte) []byte {
	if !bytes.Contains(body, []byte("NaN")) && !bytes.Contains(body, []byte("Infinity")) {
		return body
	}
	out := make([]byte, 0, len(body)+8)
	inString, escaped := false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
		}
		if word := bareWord(body[i:]); word != "" {
			out = append(out, '"')
			out = append(out, word...)
			out = append(out, '"')
			i += len(word) - 1
			continue
		}
		out = append(out, c)
	}
	return out
}

func bareWord(b []byte) string {
	for _, w := range []string{"-Infinity", "Infinity", "NaN"} {
		if bytes.HasPrefix(b, []byte(w)) {
			return w
		}
	}
	return ""
}

// FormatValue writes a metric's value as status shows it: the shortest decimal that reads back
// as the same float64, or NaN, +Inf, -Inf.
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func syntax(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the report ends before its JSON object does")
	}
	return fmt.Errorf("the report is not valid JSON: %v", err)
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "a list"
		}
	case string:
		return fmt.Sprintf("the string %q", truncate(v, 32))
	case json.Number:
		return "the number " + truncate(v.String(), 32)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
