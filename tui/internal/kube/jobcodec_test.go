package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The job watches decode the apiserver's JSON straight into rows: a list's items (an
// unreadable one among them, a row that says so), a watch's objects, the bookmark that ends
// a watch's initial events (the reflector waits for its annotation), and the Status of a
// refusal or an expired watch (the reflector lists again on it).
func TestJobCodec(t *testing.T) {
	c := jobCodec{kind: v1beta1.KindNamed("TfJob")}
	list := `{"kind":"TfJobList","apiVersion":"mlkube.io/v1beta1","metadata":{"resourceVersion":"42"},"items":[
		{"kind":"TfJob","apiVersion":"mlkube.io/v1beta1","metadata":{"name":"a","namespace":"ns","uid":"u-a","resourceVersion":"40","annotations":{"big":"xxxx"}},
		 "spec":{"replicaSpecs":[{"tfReplicaType":"MASTER","replicas":1}]},"status":{"state":"Running","replicas":"master 1/1","restarts":2}},
		{"kind":"TfJob","apiVersion":"mlkube.io/v1beta1","metadata":{"name":"b","namespace":"ns","uid":"u-b","resourceVersion":"41"},
		 "spec":{"runPolicy":{"ttlSecondsAfterFinished":2592000000}},"status":{"state":"Failed"}}]}`
	l := &JobList{}
	if _, _, err := c.Decode([]byte(list), nil, l); err != nil {
		t.Fatal(err)
	}
	if l.ResourceVersion != "42" || len(l.Items) != 2 {
		t.Fatalf("list: rv %q, %d items", l.ResourceVersion, len(l.Items))
	}
	a, b := l.Items[0], l.Items[1]
	if a.Name != "a" || a.UID != "u-a" || a.ResourceVersion != "40" || a.Kind != "TfJob" || a.State != "Running" || a.Restarts != 2 || a.Unreadable != "" {
		t.Errorf("row a: %+v", a)
	}
	if a.Annotations != nil {
		t.Errorf("row a keeps annotations: %v", a.Annotations)
	}
	if want := "spec.runPolicy.ttlSecondsAfterFinished: number 2592000000 does not fit int32"; b.Unreadable != want || b.State != "Failed" {
		t.Errorf("row b: Unreadable %q, state %q", b.Unreadable, b.State)
	}

	bookmark := `{"kind":"TfJob","apiVersion":"mlkube.io/v1beta1","metadata":{"resourceVersion":"43","annotations":{"k8s.io/initial-events-end":"true"}}}`
	obj, _, err := c.Decode([]byte(bookmark), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j, ok := obj.(*Job); !ok || j.ResourceVersion != "43" || j.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("bookmark: %#v", obj)
	}

	gone := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (43)","reason":"Expired","code":410}`
	obj, _, err = c.Decode([]byte(gone), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := obj.(*metav1.Status); !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Errorf("status: %#v", obj)
	}
}

// A watch event is taken apart without reading its object (splitWatchEvent); forms other than
// the apiserver's are read by encoding/json, to the same event.
func TestWatchEventCodec(t *testing.T) {
	obj := `{"kind":"TfJob","metadata":{"name":"a","annotations":{"x":"}\"object\":{"}}}`
	for _, frame := range []string{
		`{"type":"MODIFIED","object":` + obj + `}` + "\n",
		`{ "type": "MODIFIED", "object": ` + obj + ` }`,
		`{"object":` + obj + `,"type":"MODIFIED"}`,
	} {
		var e metav1.WatchEvent
		if _, _, err := (watchEventCodec{}).Decode([]byte(frame), nil, &e); err != nil {
			t.Fatalf("%s: %v", frame, err)
		}
		if e.Type != "MODIFIED" || string(e.Object.Raw) != obj {
			t.Errorf("%s: type %q, object %s", frame, e.Type, e.Object.Raw)
		}
	}
	var e metav1.WatchEvent
	if _, _, err := (watchEventCodec{}).Decode([]byte(`{"type":"ADDED","object":`), nil, &e); err == nil {
		t.Errorf("a cut event decoded: %+v", e)
	}
}

// A job's row keeps what its view shows of the status: the progress, with every metric, the
// first failure, with its last words, and the count of stalls.
func TestJobCodecKeepsProgressAndFirstFailure(t *testing.T) {
	c := jobCodec{kind: v1beta1.KindNamed("TfJob")}
	data := `{"kind":"TfJob","apiVersion":"mlkube.io/v1beta1","metadata":{"name":"a","namespace":"ns","uid":"u-a","resourceVersion":"40"},
		"status":{"state":"Failed","stalls":2,
		 "progress":{"step":120,"totalSteps":1000,"percent":12,"metrics":[{"name":"loss","value":"0.4213"},{"name":"acc","value":"NaN"}],
		  "replica":"a-worker-0","reportTime":"2026-11-21T21:23:33Z","remainingSeconds":200,"summary":"12%","remaining":"3m20s"},
		 "firstFailure":{"replica":"worker 1","pod":"a-worker-1","node":"n2","exitCode":1,"reason":"Error","judged":"permanent: 1-127","lastWords":"boom\nbang\n"}}}`
	obj, _, err := c.Decode([]byte(data), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := obj.(*Job)
	p, f := j.Progress, j.FirstFailure
	if p == nil || p.Step != 120 || *p.TotalSteps != 1000 || *p.Percent != 12 || len(p.Metrics) != 2 || p.Metrics[1].Value != "NaN" ||
		p.Summary != "12%" || p.Remaining != "3m20s" || p.ReportTime.Unix() != 1795296213 {
		t.Errorf("progress %+v", p)
	}
	if f == nil || f.Replica != "worker 1" || f.Node != "n2" || *f.ExitCode != 1 || f.Judged != "permanent: 1-127" || f.LastWords != "boom\nbang\n" {
		t.Errorf("first failure %+v", f)
	}
	if j.Stalls != 2 {
		t.Errorf("stalls %d", j.Stalls)
	}
}
