package v1beta1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// A list holding one job whose number does not fit its field still decodes: the others whole,
// that one with its name, its status and why.
func TestListWithAnUnreadableJob(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	for _, k := range Kinds {
		t.Run(k.Name, func(t *testing.T) {
			list := `{"apiVersion":"mlkube.io/v1beta1","kind":"` + k.Name + `List","items":[` +
				`{"metadata":{"name":"bad","uid":"u1"},"spec":{"runPolicy":{"ttlSecondsAfterFinished":2592000000,"backoffLimit":3}},"status":{"state":"Running","restarts":2}},` +
				`{"metadata":{"name":"good"},"spec":{"runPolicy":{"backoffLimit":3}}}]}`
			into := k.NewList()
			if _, _, err := codecs.UniversalDeserializer().Decode([]byte(list), nil, into); err != nil {
				t.Fatalf("the list failed on one job: %v", err)
			}
			items, err := itemsOf(into)
			if err != nil {
				t.Fatal(err)
			}
			bad, good := items[0], items[1]
			if bad.GetName() != "bad" || bad.GetUID() != "u1" {
				t.Errorf("metadata lost: %s %s", bad.GetName(), bad.GetUID())
			}
			want := "spec.runPolicy.ttlSecondsAfterFinished: number 2592000000 does not fit int32"
			if bad.Unreadable() != want {
				t.Errorf("Unreadable() = %q, want %q", bad.Unreadable(), want)
			}
			if bad.JobStatus().State != JobStateRunning || bad.JobStatus().Restarts != 2 {
				t.Errorf("status lost: %+v", bad.JobStatus())
			}
			if p := bad.Policy(); p.BackoffLimit != nil {
				t.Errorf("an unreadable job keeps a half-read spec: backoffLimit %d", *p.BackoffLimit)
			}
			if good.Unreadable() != "" || good.Policy().BackoffLimit == nil || *good.Policy().BackoffLimit != 3 {
				t.Errorf("the readable job was not read whole: %q %+v", good.Unreadable(), good.Policy())
			}
			// A copy (what every cache hands out) is as unreadable as the original.
			if c := bad.DeepCopyObject().(Job); c.Unreadable() != want {
				t.Errorf("a deep copy lost Unreadable: %q", c.Unreadable())
			}
		})
	}
}

func TestUnreadableStatusToo(t *testing.T) {
	var j TfJob
	err := j.UnmarshalJSON([]byte(`{"metadata":{"name":"x"},"spec":{"runPolicy":{"backoffLimit":"three"}},"status":{"restarts":99999999999}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spec.runPolicy.backoffLimit: string", "status.restarts: number 99999999999 does not fit int32"} {
		if !strings.Contains(j.Unreadable(), want) {
			t.Errorf("Unreadable() = %q, want it to name %q", j.Unreadable(), want)
		}
	}
	if j.Name != "x" {
		t.Errorf("name lost")
	}
}

func TestMalformedJSONIsStillAnError(t *testing.T) {
	var j MXJob
	if err := j.UnmarshalJSON([]byte(`{"metadata":`)); err == nil {
		t.Fatal("malformed JSON decoded")
	}
}

func itemsOf(list List) ([]Job, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []Job
	for _, o := range objs {
		out = append(out, o.(Job))
	}
	return out, nil
}
