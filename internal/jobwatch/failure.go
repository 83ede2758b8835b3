package jobwatch

import (
	"fmt"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// FailureExit is how a replica that failed ended, as the operator judged it: "exit code 1 (Error;
// permanent: 1-127)", or the kubelet's reason alone when its container did not exit ("Evicted").
func FailureExit(f *v1beta1.ReplicaFailure) string {
	detail := joinNonEmpty("; ", f.Reason, f.Judged)
	switch {
	case f.ExitCode == nil && detail == "":
		return "failed"
	case f.ExitCode == nil:
		return detail
	case detail == "":
		return fmt.Sprintf("exit code %d", *f.ExitCode)
	}
	return fmt.Sprintf("exit code %d (%s)", *f.ExitCode, detail)
}

// LastWords is the end of what a failed replica's container printed, line by line, without the
// blank end; none when it said nothing.
func LastWords(f *v1beta1.ReplicaFailure) []string {
	text := strings.TrimRight(f.LastWords, " \t\r\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return lines
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
