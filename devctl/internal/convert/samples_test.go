package convert

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// samplesDir is the repository's samples/, from this package's directory.
var samplesDir = filepath.Join("..", "..", "..", "samples")

// sample is one samples/**/*.yaml, converted.
type sample struct {
	path string // relative to samples/, e.g. legacy/tfjob-2017.yaml
	res  *Result
}

// samples converts every job of samples/**/*.yaml, of any kind.
func samples(t *testing.T) []sample {
	t.Helper()
	var out []sample
	err := filepath.WalkDir(samplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".yaml" {
			return nil
		}
		rel, _ := filepath.Rel(samplesDir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if doc, err := parse(data); err == nil && !isJob(fmt.Sprint(doc["kind"])) {
			t.Logf("samples/%s is a %v, not a job: left out", rel, doc["kind"])
			return nil
		}
		res, err := Convert(data)
		if err != nil {
			t.Errorf("samples/%s: %v", rel, err)
			return nil
		}
		out = append(out, sample{filepath.ToSlash(rel), res})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no samples under %s", samplesDir)
	}
	return out
}

// isJob tells a job's kind, today's or an old one, from other objects' (a sample's Secret).
func isJob(kind string) bool {
	for _, k := range jobKinds {
		if strings.EqualFold(kind, k.Name) || k.kubeflow != nil && strings.EqualFold(kind, k.kubeflow.kind) {
			return true
		}
	}
	return false
}

// legacySamples are the samples in the old formats and the groups they must convert to.
var legacySamples = map[string]struct {
	from   string
	groups string // type×replicas, in order
}{
	"legacy/tfjob-2017.yaml":        {"mlkube.io/v1beta1 TfJob (2017, snake_case)", "MASTER×1 WORKER×1 PS×1"},
	"legacy/tfjob-v1alpha1.yaml":    {"tensorflow.org/v1alpha1 TfJob", "MASTER×1 WORKER×2 PS×1"},
	"legacy/tfjob-kubeflow-v1.yaml": {"kubeflow.org/v1 TFJob", "CHIEF×1 WORKER×2 PS×1"},
	"legacy/mxjob-fioravanzo.yaml":  {"fioravanzo.org/v1alpha1 MXJob", "SCHEDULER×1 SERVER×2 WORKER×2"},
}

func TestSamples(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range samples(t) {
		t.Run(s.path, func(t *testing.T) {
			assertCurrent(t, s.res)
			if len(s.res.Invalid) != 0 {
				t.Errorf("the apiserver would refuse samples/%s: %v", s.path, s.res.Invalid)
			}
			data, err := os.ReadFile(filepath.Join(samplesDir, s.path))
			if err != nil {
				t.Fatal(err)
			}
			if lines := strings.SplitN(string(data), "\n", 3); len(lines) < 2 || !strings.HasPrefix(lines[0], "# ") || strings.HasPrefix(lines[1], "#") {
				t.Errorf("a sample starts with one comment line saying what it is")
			}
			want, legacy := legacySamples[s.path]
			if !legacy {
				if s.res.From != "" || len(s.res.Warnings) != 0 {
					t.Errorf("a sample in today's API converts with From %q and warnings:\n%s", s.res.From, strings.Join(s.res.Warnings, "\n"))
				}
				return
			}
			seen[s.path] = true
			if s.res.From != want.from || len(s.res.Warnings) == 0 {
				t.Errorf("From %q with %d warnings, want %q with warnings", s.res.From, len(s.res.Warnings), want.from)
			}
			var groups []string
			for _, g := range s.res.Job.Groups() {
				groups = append(groups, g.Type+"×"+strconv.Itoa(int(g.Replicas)))
				for _, c := range g.Template.Spec.Containers {
					// Runnable in the offline kind cluster: the trainer image, and nothing to pull.
					if c.Image != "mlkube/trainer:dev" || c.ImagePullPolicy != "IfNotPresent" {
						t.Errorf("%s container %s: image %s, pull policy %q", g.Type, c.Name, c.Image, c.ImagePullPolicy)
					}
				}
			}
			if got := strings.Join(groups, " "); got != want.groups {
				t.Errorf("groups %s, want %s", got, want.groups)
			}
			t.Logf("warnings:\n%s", strings.Join(s.res.Warnings, "\n"))
		})
	}
	for path := range legacySamples {
		if !seen[path] {
			t.Errorf("samples/%s is missing", path)
		}
	}
}
