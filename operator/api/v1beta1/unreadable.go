package v1beta1

import (
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// A job the apiserver holds but these types cannot: a number stored before its CRD bounded it
// (an int32 field given 2592000000), a CRD edited by hand, a newer mlkube's field of another
// type. Go's JSON decoder fails a whole list on one such object, and every informer, the
// operator's, devctl's and the dashboard's, lists all jobs of a kind: one tenant's job would
// stop every other job of that kind in the cluster. So a job decodes leniently: what cannot be
// read leaves the job with its metadata (and its status, when that reads), an empty spec, and
// Unreadable saying which field. Readers must check Unreadable before they act on the spec.
// Each kind's UnmarshalJSON and Unreadable, beside its type in its _types.go, do it through
// decodeJob below.

// decodeJob decodes data into whole, a job's plain type (one without this UnmarshalJSON). When
// the job cannot be read whole, it keeps what can be (type, metadata, status) in the job's
// fields and returns why the rest could not be; "" means whole holds all of it. Malformed JSON
// is still an error: that is no stored object.
func decodeJob(data []byte, whole any, reset func(), tm *metav1.TypeMeta, om *metav1.ObjectMeta, st *JobStatus) (why string, err error) {
	reset()
	err = kjson.UnmarshalCaseSensitivePreserveInts(data, whole)
	if err == nil {
		return "", nil
	}
	if bad, _ := kjson.SyntaxErrorOffset(err); bad {
		return "", err
	}
	// The decoder fills every field it can and skips the one it cannot: a half-read spec would
	// run a job with a zero where the user wrote a number (a TTL of 0 deletes it on finishing).
	reset()
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
	}
	if herr := kjson.UnmarshalCaseSensitivePreserveInts(data, &head); herr != nil {
		return "", err // not even whose it is: nothing to report it on
	}
	*tm, *om = head.TypeMeta, head.Metadata
	why = describeDecodeError(err)
	var status struct {
		Status JobStatus `json:"status"`
	}
	if serr := kjson.UnmarshalCaseSensitivePreserveInts(data, &status); serr == nil {
		*st = status.Status
	} else if serr.Error() != err.Error() {
		why += "; " + describeDecodeError(serr)
	}
	return why, nil
}

// typeError is the decoder's message for a value that does not fit its field, e.g.
// "json: cannot unmarshal number 2592000000 into Go struct field RunPolicy.spec.runPolicy.ttlSecondsAfterFinished of type int32".
var typeError = regexp.MustCompile(`cannot unmarshal (.+) into Go struct field [^.]*\.(\S+) of type (\S+)`)

// describeDecodeError says which field could not be read and why, in the manifest's terms:
// "spec.runPolicy.ttlSecondsAfterFinished: number 2592000000 does not fit int32".
func describeDecodeError(err error) string {
	if m := typeError.FindStringSubmatch(err.Error()); m != nil {
		return m[2] + ": " + m[1] + " does not fit " + m[3]
	}
	return err.Error()
}

// UnreadableHint is what a user can do about an unreadable job.
const UnreadableHint = "this mlkube cannot act on the job: set the field to a value its CRD allows (kubectl edit), or delete the job and create it again"
