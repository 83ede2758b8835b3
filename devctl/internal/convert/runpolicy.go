package convert

import (
	"fmt"
	"maps"
	"math"
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

func readRunPolicyFields(f *fields) (runPolicyFields, error) {
	rp := runPolicyFields{values: map[string]any{}, paths: map[string]string{}}
	if s, path, ok, err := f.str("cleanPodPolicy", "cleanupPodPolicy"); err != nil {
		return rp, err
	} else if ok {
		p, err := cleanPodPolicy(path, s)
		if err != nil {
			return rp, err
		}
		rp.values["cleanPodPolicy"], rp.paths["cleanPodPolicy"] = p, path
	}
	if n, path, ok, err := f.integer(0, math.MaxInt32, "backoffLimit"); err != nil {
		return rp, err
	} else if ok {
		rp.values["backoffLimit"], rp.paths["backoffLimit"] = int32(n), path
	}
	if n, path, ok, err := f.integer(1, math.MaxInt64, "activeDeadlineSeconds"); err != nil {
		return rp, err
	} else if ok {
		rp.values["activeDeadlineSeconds"], rp.paths["activeDeadlineSeconds"] = n, path
	}
	// v1alpha2 spelled it ttlSecondsAfterFinishing.
	if n, path, ok, err := f.integer(0, math.MaxInt32, "ttlSecondsAfterFinished", "ttlSecondsAfterFinishing"); err != nil {
		return rp, err
	} else if ok {
		rp.values["ttlSecondsAfterFinished"], rp.paths["ttlSecondsAfterFinished"] = int32(n), path
	}
	return rp, nil
}

// runPolicy reads spec.runPolicy and the older top-level fields it replaced, for a job of
// today's kind; where both are set, runPolicy wins, as it did in Kubeflow.
func runPolicy(spec *fields, kind string, w *warnings) (v1beta1.RunPolicy, error) {
	var out v1beta1.RunPolicy
	top, err := readRunPolicyFields(spec)
	if err != nil {
		return out, err
	}
	merged := runPolicyFields{values: maps.Clone(top.values), paths: maps.Clone(top.paths)}
	if rp, ok, err := spec.object("runPolicy"); err != nil {
		return out, err
	} else if ok {
		nested, err := readRunPolicyFields(rp)
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
			w.add("dropped %s: %s: the mlkube operator manages every %s", path, s, kind)
		}
		w.dropped(rp.unread(), "today's runPolicy has no such fields")
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

// cleanPodPolicy reads a cleanPodPolicy as today's API and Kubeflow spell it (All, Running,
// None) or as kubeflow.org/v1alpha1 did (CleanAll, CleanRunning, CleanNone).
func cleanPodPolicy(path, s string) (v1beta1.CleanPodPolicy, error) {
	switch strings.TrimPrefix(s, "Clean") {
	case "All":
		return v1beta1.CleanPodPolicyAll, nil
	case "Running":
		return v1beta1.CleanPodPolicyRunning, nil
	case "None":
		return v1beta1.CleanPodPolicyNone, nil
	}
	return "", fmt.Errorf("%s: %q is not one of All, Running, None", path, s)
}
