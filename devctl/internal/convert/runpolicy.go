package convert

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// runPolicyFields are the fields of Kubeflow's runPolicy, also found at the top of the spec
// before Kubeflow grouped them (v1alpha2 to early v1), and in the list forms (cleanPodPolicy in
// kubeflow.org/v1alpha1's TFJob, cleanupPodPolicy in its MXJob).
type runPolicyFields struct {
	values map[string]any    // field name → value read
	paths  map[string]string // field name → where
}

// readRunPolicyFields reads them for a job of kind k, as written: the CRD says what they take.
func readRunPolicyFields(f *fields, k *jobKind) (runPolicyFields, error) {
	rp := runPolicyFields{values: map[string]any{}, paths: map[string]string{}}
	if s, path, ok, err := f.str("cleanPodPolicy", "cleanupPodPolicy"); err != nil {
		return rp, err
	} else if ok {
		rp.values["cleanPodPolicy"], rp.paths["cleanPodPolicy"] = cleanPodPolicy(s), path
	}
	// v1alpha2 spelled ttlSecondsAfterFinished ttlSecondsAfterFinishing.
	for _, names := range [][]string{{"backoffLimit"}, {"activeDeadlineSeconds"}, {"ttlSecondsAfterFinished", "ttlSecondsAfterFinishing"}} {
		n, path, ok, err := f.integer(names...)
		if err != nil {
			return rp, err
		}
		if !ok {
			continue
		}
		var v any = n // activeDeadlineSeconds is an int64
		if names[0] != "activeDeadlineSeconds" {
			if v, err = k.int32Field(n, path, "spec.runPolicy."+names[0], false); err != nil {
				return rp, err
			}
		}
		rp.values[names[0]], rp.paths[names[0]] = v, path
	}
	return rp, nil
}

// runPolicy reads spec.runPolicy and the older top-level fields it replaced, for a job of
// today's kind k; where both are set, runPolicy wins, as it did in Kubeflow. It records in o
// where the manifest had each.
func runPolicy(spec *fields, k *jobKind, w *warnings, o origins) (v1beta1.RunPolicy, error) {
	var out v1beta1.RunPolicy
	top, err := readRunPolicyFields(spec, k)
	if err != nil {
		return out, err
	}
	merged := runPolicyFields{values: maps.Clone(top.values), paths: maps.Clone(top.paths)}
	if rp, ok, err := spec.object("runPolicy"); err != nil {
		return out, err
	} else if ok {
		nested, err := readRunPolicyFields(rp, k)
		if err != nil {
			return out, err
		}
		names := make([]string, 0, len(nested.values))
		for name := range nested.values {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if old, both := top.values[name]; both && fmt.Sprint(old) != fmt.Sprint(nested.values[name]) {
				w.add("%s and %s disagree: took %s's %v", top.paths[name], nested.paths[name], nested.paths[name], nested.values[name])
			}
			merged.values[name], merged.paths[name] = nested.values[name], nested.paths[name]
		}
		if _, path, ok, _ := rp.raw("schedulingPolicy"); ok {
			w.add("dropped %s: mlkube does no gang scheduling; set a priorityClassName or schedulerName in the pod templates if you need one", path)
		}
		if on, _, ok, err := rp.boolean("suspend"); err != nil {
			return out, err
		} else if ok {
			out.Suspend = &on
		}
		if s, path, ok, err := rp.str("managedBy"); err != nil {
			return out, err
		} else if ok && s != "" {
			w.add("dropped %s: %s: the mlkube operator manages every %s", path, s, k.Name)
		}
		w.dropped(rp.unread(), "today's runPolicy has no such fields")
	}
	for name, path := range merged.paths {
		o.set("spec.runPolicy."+name, path, false)
	}
	if v, ok := merged.values["cleanPodPolicy"]; ok {
		out.CleanPodPolicy = v.(v1beta1.CleanPodPolicy)
	}
	if v, ok := merged.values["backoffLimit"]; ok {
		n := v.(int32)
		out.BackoffLimit = &n
	}
	if v, ok := merged.values["activeDeadlineSeconds"]; ok {
		n := v.(int64)
		out.ActiveDeadlineSeconds = &n
	}
	if v, ok := merged.values["ttlSecondsAfterFinished"]; ok {
		n := v.(int32)
		out.TTLSecondsAfterFinished = &n
	}
	return out, nil
}

// cleanPodPolicy is a cleanPodPolicy in today's spelling, which Kubeflow's is too:
// kubeflow.org/v1alpha1 spelled All, Running and None CleanAll, CleanRunning and CleanNone. Any
// other value is kept as written, for the CRD to judge.
func cleanPodPolicy(s string) v1beta1.CleanPodPolicy {
	switch p := v1beta1.CleanPodPolicy(strings.TrimPrefix(s, "Clean")); p {
	case v1beta1.CleanPodPolicyAll, v1beta1.CleanPodPolicyRunning, v1beta1.CleanPodPolicyNone:
		return p
	}
	return v1beta1.CleanPodPolicy(s)
}
