package commands

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/devctl/internal/follow"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// A failed job's last lines name the replica that failed first (status.firstFailure): its pod
// and node, its exit code and how it was judged, and its last words; the Failed condition's
// message stays the last line (main prints the error), and the exit code is 1.
func TestRunEndNamesTheFirstFailure(t *testing.T) {
	code := int32(1)
	job := &v1beta1.TfJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fail"}}
	job.Status = v1beta1.JobStatus{State: v1beta1.JobStateFailed, Phase: v1beta1.JobPhaseFailed,
		Conditions: []metav1.Condition{{Type: v1beta1.JobFailed, Status: metav1.ConditionTrue, Reason: "ExitCode",
			Message: "pod fail-worker-1 exited with code 1 (Error; permanent: 1-127): the job failed"}},
		FirstFailure: &v1beta1.ReplicaFailure{Replica: "worker 1", Pod: "fail-worker-1", Node: "kind-worker2", ExitCode: &code,
			Reason: "Error", Judged: "permanent: 1-127", LastWords: "Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n"}}
	var status bytes.Buffer
	r := &runner{status: &status, submitted: time.Now()}
	err := r.report(context.Background(), job, &follow.Result{Job: job, Ended: true}, nil)
	if ExitCode(err) != ExitFailed {
		t.Fatalf("exit %d (%v), want %d", ExitCode(err), err, ExitFailed)
	}
	want := "first failure: worker 1 (pod fail-worker-1, node kind-worker2): exit code 1 (Error; permanent: 1-127)\n" +
		"  last words:\n" +
		"    Traceback (most recent call last):\n" +
		"    RuntimeError: CUDA out of memory\n"
	if status.String() != want {
		t.Errorf("said\n%s\nwant\n%s", status.String(), want)
	}
	if !strings.HasSuffix(err.Error(), ": pod fail-worker-1 exited with code 1 (Error; permanent: 1-127): the job failed") {
		t.Errorf("the error is not the Failed condition's message: %v", err)
	}

	// A job that failed with no first failure (its deadline passed) ends as before.
	job.Status.FirstFailure = nil
	status.Reset()
	if err := r.report(context.Background(), job, &follow.Result{Job: job, Ended: true}, nil); ExitCode(err) != ExitFailed || status.Len() != 0 {
		t.Errorf("exit %d, said %q", ExitCode(err), status.String())
	}
}

// The progress is drawn in place only where status is a terminal (a character device, as
// steps.IsTerminal takes one; /dev/null is one too) that is not dumb; in a file or a pipe it comes
// as lines. Logs to a file are written as they are.
func TestProgressInPlaceOnlyOnATerminal(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	must(t, err)
	defer file.Close()
	var buf bytes.Buffer
	for name, w := range map[string]io.Writer{"file": file, "buffer": &buf} {
		if live, out, status := liveLine(w, w); live != nil || out != w || status != w {
			t.Errorf("%s: drawn in place", name)
		}
	}
	term, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	must(t, err)
	defer term.Close()
	t.Setenv("TERM", "xterm")
	live, out, status := liveLine(file, term)
	if live == nil || status == io.Writer(term) {
		t.Error("on a terminal: not drawn in place")
	}
	if out != io.Writer(file) {
		t.Error("logs to a file go through the terminal's line")
	}
	if live, _, _ := liveLine(term, term); live == nil {
		t.Error("stdout and stderr on a terminal: not drawn in place")
	}
	t.Setenv("TERM", "dumb")
	if live, _, _ := liveLine(file, term); live != nil {
		t.Error("TERM=dumb: drawn in place")
	}
}
