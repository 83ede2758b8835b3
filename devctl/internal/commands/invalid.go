package commands

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// invalidCauses turns the apiserver's refusal of an invalid object into one line per cause,
// field path first: "spec.replicaSpecs[1].replicas: should be greater than or equal to 1 (got
// 0)". It returns nil for any other error.
func invalidCauses(err error) []string {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var lines []string
	for _, c := range status.Status().Details.Causes {
		field := c.Field
		if field == "<nil>" {
			field = "" // a rule on the whole object; its message names the field itself
		}
		if refusals, ok := policyRefusals(c.Message); ok && field == "" {
			lines = append(lines, refusals...)
			continue
		}
		msg := causeMessage(field, c.Message)
		if field != "" {
			msg = field + ": " + msg
		}
		lines = append(lines, msg)
	}
	if len(lines) == 0 {
		lines = append(lines, status.Status().Message)
	}
	return lines
}

// policyPrefix starts an admission policy's refusal: "ValidatingAdmissionPolicy 'mlkube.io-jobs'
// with binding 'mlkube.io-jobs' denied request: ".
var policyPrefix = regexp.MustCompile(`^ValidatingAdmissionPolicy '[^']*'( with binding '[^']*')? denied request: `)

// policyRefusals reads an admission policy's refusal as the lines it lists: mlkube's policy
// (operator/admission) starts each with its field and joins them with "; " before the next
// field, "spec." or "metadata.".
func policyRefusals(msg string) ([]string, bool) {
	loc := policyPrefix.FindStringIndex(msg)
	if loc == nil {
		return nil, false
	}
	rest := msg[loc[1]:]
	var lines []string
	for {
		i := nextField.FindStringIndex(rest)
		if i == nil {
			return append(lines, rest), true
		}
		lines, rest = append(lines, rest[:i[0]]), rest[i[0]+len("; "):]
	}
}

// nextField is where one refusal of a policy's list ends and the next, naming its field, begins.
var nextField = regexp.MustCompile(`; (spec|metadata)\.`)

// causeMessage reads a cause's message without what the line already says: the field (the
// schema's messages repeat it as "<field> in body") and the bare placeholder values CEL rules
// report ("object", null); a value a person wrote moves to the end: "(got 0)".
func causeMessage(field, msg string) string {
	rest, ok := strings.CutPrefix(msg, "Invalid value: ")
	if !ok {
		return msg
	}
	var value string
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return msg
		}
		value, rest = q, rest[len(q):]
	} else {
		i := strings.Index(rest, ": ")
		if i < 0 {
			return msg
		}
		value, rest = rest[:i], rest[i:]
	}
	rest, ok = strings.CutPrefix(rest, ": ")
	if !ok {
		return msg
	}
	if field != "" {
		rest = strings.TrimPrefix(rest, field+" in body ")
	}
	switch value {
	case `"object"`, `"array"`, "null", `""`:
		return rest
	}
	return fmt.Sprintf("%s (got %s)", rest, value)
}
