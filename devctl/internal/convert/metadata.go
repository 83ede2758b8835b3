package convert

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keptMetadata is what carries over of an old job's metadata: what a person wrote. The rest
// (uid, resourceVersion, creationTimestamp, managedFields, ...) belonged to the old object in
// its old cluster.
var keptMetadata = []string{"name", "generateName", "namespace", "labels", "annotations"}

// lastApplied is kubectl's copy of the old manifest: kept, it would describe the old API.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// metadata carries over the job's name, namespace, labels and annotations.
func metadata(doc *fields, w *warnings) (metav1.ObjectMeta, error) {
	var meta metav1.ObjectMeta
	md, ok, err := doc.object("metadata")
	if err != nil || !ok {
		return meta, err
	}
	kept := map[string]any{}
	for _, k := range keptMetadata {
		if _, v, ok, _ := md.lookup(k); ok {
			kept[k] = v
		}
	}
	if _, err := decode(md.path, kept, &meta); err != nil {
		return meta, err
	}
	if _, ok := meta.Annotations[lastApplied]; ok {
		delete(meta.Annotations, lastApplied)
		if len(meta.Annotations) == 0 {
			meta.Annotations = nil
		}
		w.add("dropped the annotation %s: it holds the old manifest", lastApplied)
	}
	dropped := md.unread()
	sort.Strings(dropped)
	w.dropped(dropped, "they belonged to the old object in its cluster")
	return meta, nil
}
