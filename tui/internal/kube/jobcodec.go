package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/rest"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The job list's watches decode each job straight from the apiserver's JSON into its kind's
// Go type, once, and make the row from that. The dynamic client they used before decoded
// every object into a map (after reading the whole text once more to learn its kind), and
// the transform wrote the map out as JSON again to decode it into the Go type: three passes
// over 5,000 jobs before the first screen, two thirds of the dashboard's CPU at start
// (bench/tui, docs/performance.md).

// jobClient is a REST client for one kind's jobs whose responses decode into rows.
func jobClient(cfg *rest.Config, hc *http.Client, kind *v1beta1.Kind) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	gv := v1beta1.GroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON // CRDs speak JSON (and CBOR), not protobuf
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = jobCodec{kind: kind}
	return rest.RESTClientForConfigAndClient(c, hc)
}

// JobList is a list of job rows, as a list response decodes.
type JobList struct {
	metav1.ListMeta
	Items []*Job
}

func (l *JobList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (l *JobList) DeepCopyObject() runtime.Object   { return l } // rows are never changed

// jobCodec decodes one kind's jobs, lists of them and the apiserver's Status answers; it
// encodes nothing (the dashboard only reads).
type jobCodec struct{ kind *v1beta1.Kind }

func (c jobCodec) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       c,
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: watchEventCodec{}, Framer: jsonserializer.Framer},
	}}
}

func (c jobCodec) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (c jobCodec) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

func (c jobCodec) Identifier() runtime.Identifier { return "tfjob-tui-job-rows" }

func (c jobCodec) Encode(obj runtime.Object, _ io.Writer) error {
	return fmt.Errorf("tfjob-tui encodes no %T: it only reads", obj)
}

// Decode decodes a list into a *JobList, a Status into a *metav1.Status, and a job into its
// row.
func (c jobCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case *JobList:
		var l struct {
			Metadata metav1.ListMeta   `json:"metadata"`
			Items    []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &l); err != nil {
			return nil, nil, err
		}
		into.ListMeta = l.Metadata
		into.Items = make([]*Job, 0, len(l.Items))
		for _, raw := range l.Items {
			obj, err := c.decodeObject(raw)
			if err != nil {
				return nil, nil, err
			}
			j, ok := obj.(*Job)
			if !ok {
				return nil, nil, fmt.Errorf("a %s list holds a %T", c.kind.Name, obj)
			}
			into.Items = append(into.Items, j)
		}
		return into, nil, nil
	case *metav1.Status:
		return into, nil, json.Unmarshal(data, into)
	}
	obj, err := c.decodeObject(data)
	return obj, nil, err
}

// decodeObject decodes a job (a watch event's, or a list's item) into its row, or the Status
// the apiserver answers with (a watch's ERROR event, a refusal).
func (c jobCodec) decodeObject(data []byte) (runtime.Object, error) {
	job, err := decodeJob(c.kind, data)
	if err != nil {
		return nil, err
	}
	if job.GetObjectKind().GroupVersionKind().Kind == "Status" {
		st := &metav1.Status{}
		return st, json.Unmarshal(data, st)
	}
	return jobRow(c.kind.Name, job), nil
}

// decodeJob decodes data into the kind's Go type as the operator does: leniently, a field
// the type cannot hold leaving the job Unreadable (v1beta1.Job.Unreadable).
func decodeJob(kind *v1beta1.Kind, data []byte) (v1beta1.Job, error) {
	job := kind.New()
	var err error
	if u, ok := job.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(data) // without encoding/json's pass over data to check it first
	} else {
		err = json.Unmarshal(data, job)
	}
	return job, err
}

// watchEventCodec decodes the frames of a watch stream into metav1.WatchEvents, whose objects
// jobCodec then decodes.
type watchEventCodec struct{}

func (watchEventCodec) Identifier() runtime.Identifier { return "tfjob-tui-watch-events" }

func (watchEventCodec) Encode(obj runtime.Object, _ io.Writer) error {
	return fmt.Errorf("tfjob-tui encodes no %T: it only reads", obj)
}

func (watchEventCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	e, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("a watch stream decodes into watch events, not %T", into)
	}
	*e = metav1.WatchEvent{}
	if typ, obj, ok := splitWatchEvent(data); ok {
		e.Type, e.Object.Raw = typ, obj
		return e, nil, nil
	}
	return e, nil, json.Unmarshal(data, e)
}

// splitWatchEvent takes a watch event as the apiserver writes it, {"type":"ADDED","object":
// {...}}, apart without reading the object: encoding/json would read it twice (to check it,
// then to skip it) before jobCodec reads it once more, a third of the dashboard's CPU at start.
// The object is checked where it is decoded. ok is false for any other form, which
// encoding/json then reads.
func splitWatchEvent(data []byte) (typ string, obj []byte, ok bool) {
	d := bytes.TrimSpace(data)
	rest, found := bytes.CutPrefix(d, []byte(`{"type":"`))
	if !found {
		return "", nil, false
	}
	i := bytes.IndexByte(rest, '"')
	if i <= 0 {
		return "", nil, false
	}
	for _, c := range rest[:i] {
		if c < 'A' || c > 'Z' { // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
			return "", nil, false
		}
	}
	typ = string(rest[:i])
	body, found := bytes.CutPrefix(rest[i+1:], []byte(`,"object":`))
	if !found || !bytes.HasSuffix(body, []byte("}")) {
		return "", nil, false
	}
	body = bytes.TrimSpace(body[:len(body)-1])
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return "", nil, false
	}
	return typ, bytes.Clone(body), true // the frame's buffer is reused for the next event
}
