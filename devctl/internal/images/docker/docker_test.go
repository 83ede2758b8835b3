package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/tfjob"
)

// jobOf builds a job of kind k as a manifest would spell it, from the kinds table alone: one
// group of each of the kind's replica types, each with an init container, the kind's training
// container (an image of the group's own) and a sidecar every group shares.
func jobOf(t *testing.T, k *v1beta1.Kind) v1beta1.Job {
	t.Helper()
	var groups []any
	for _, typ := range k.Types {
		lower := strings.ToLower(typ)
		groups = append(groups, map[string]any{k.TypeField: typ, "replicas": int64(1), "template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "fetch", "image": "example.com/fetch-" + lower + ":v1"}},
			"containers": []any{
				map[string]any{"name": k.Container, "image": "example.com/" + lower + ":v1", "imagePullPolicy": "IfNotPresent"},
				map[string]any{"name": "sidecar", "image": "sidecar:v2"},
			},
		}}})
	}
	manifest := map[string]any{
		"apiVersion": v1beta1.GroupVersion.String(), "kind": k.Name,
		"metadata": map[string]any{"name": "j"},
		"spec":     map[string]any{"replicaSpecs": groups},
	}
	job := k.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(manifest, job); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestOfListsEveryContainerOfEveryGroupOfEveryKind(t *testing.T) {
	if len(v1beta1.Kinds) < 3 {
		t.Fatalf("only %d kinds registered", len(v1beta1.Kinds))
	}
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			uses := Of(jobOf(t, k))
			var want []Use
			var wantRefs []string
			for _, typ := range k.Types {
				lower := strings.ToLower(typ)
				want = append(want,
					Use{Image: "example.com/fetch-" + lower + ":v1", Where: typ + " container fetch"},
					Use{Image: "example.com/" + lower + ":v1", PullPolicy: corev1.PullIfNotPresent, Where: typ + " container " + k.Container},
					Use{Image: "sidecar:v2", Where: typ + " container sidecar"})
				wantRefs = append(wantRefs, "example.com/fetch-"+lower+":v1", "example.com/"+lower+":v1")
				if len(wantRefs) == 2 {
					wantRefs = append(wantRefs, "sidecar:v2")
				}
			}
			if !reflect.DeepEqual(uses, want) {
				t.Errorf("Of =\n%+v\nwant\n%+v", uses, want)
			}
			if got := Refs(uses); !reflect.DeepEqual(got, wantRefs) {
				t.Errorf("Refs = %v, want each once in order of first use: %v", got, wantRefs)
			}
		})
	}
}

// TensorBoard's pod is no replica's, yet it runs an image too: the TfJob framework's extras.
func TestOfListsTensorBoard(t *testing.T) {
	k := v1beta1.KindNamed("TfJob")
	for _, tc := range []struct{ image, want string }{
		{"example.com/my-tensorboard:v1", "example.com/my-tensorboard:v1"},
		{"", tfjob.DefaultTensorboardImage},
	} {
		job := jobOf(t, k).(*v1beta1.TfJob)
		job.Spec.Tensorboard = &v1beta1.TensorboardSpec{LogDir: "/logs", Image: tc.image}
		uses := Of(job)
		last := uses[len(uses)-1]
		if last.Image != tc.want || last.Where != "j-tensorboard container tensorboard" {
			t.Errorf("image %q: the last use is %+v, want TensorBoard's %s", tc.image, last, tc.want)
		}
		if len(uses) != 3*len(k.Types)+1 {
			t.Errorf("image %q: %d uses, want the replicas' and TensorBoard's", tc.image, len(uses))
		}
	}
}

func TestFullName(t *testing.T) {
	for ref, want := range map[string]string{
		"my-trainer":                             "docker.io/library/my-trainer:latest",
		"my-trainer:v1":                          "docker.io/library/my-trainer:v1",
		"docker.io/my-trainer:v1":                "docker.io/library/my-trainer:v1",
		"index.docker.io/team/trainer":           "docker.io/team/trainer:latest",
		"team/trainer:v2":                        "docker.io/team/trainer:v2",
		"example.com/my-trainer:v1":              "example.com/my-trainer:v1",
		"localhost:5000/a/b:c":                   "localhost:5000/a/b:c",
		"x@sha256:" + strings.Repeat("0", 64):    "",
		"x:v1@sha256:" + strings.Repeat("0", 64): "",
		"Upper:v1":                               "",
	} {
		got, ok := FullName(ref)
		if got != want || ok != (want != "") {
			t.Errorf("FullName(%q) = %q, %v; want %q", ref, got, ok, want)
		}
	}
}

func TestLoadableLeavesOutOursAndDigests(t *testing.T) {
	got := Loadable([]string{"my-trainer:v1", "mlkube/trainer:dev", "docker.io/mlkube/operator:0123456789ab", "mlkube/trainer-mine:v1", "x@sha256:" + strings.Repeat("0", 64)})
	want := map[string]string{"my-trainer:v1": "docker.io/library/my-trainer:v1", "mlkube/trainer-mine:v1": "docker.io/mlkube/trainer-mine:v1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Loadable = %v, want %v", got, want)
	}
}

func TestPullsAlways(t *testing.T) {
	for _, tc := range []struct {
		use  Use
		want bool
	}{
		{Use{Image: "my-trainer:v1"}, false},
		{Use{Image: "my-trainer"}, true},
		{Use{Image: "my-trainer:latest"}, true},
		{Use{Image: "my-trainer:latest", PullPolicy: corev1.PullIfNotPresent}, false},
		{Use{Image: "my-trainer:v1", PullPolicy: corev1.PullAlways}, true},
		{Use{Image: "my-trainer:v1", PullPolicy: corev1.PullNever}, false},
	} {
		if got := tc.use.PullsAlways(); got != tc.want {
			t.Errorf("%+v: PullsAlways %v, want %v", tc.use, got, tc.want)
		}
	}
}

// A node's list, as kindcluster.NodeImages reads it: each tag and, from containerd's CRI, the
// image ID, to the manifest digest.
func TestHolds(t *testing.T) {
	img := Image{Ref: "my-trainer:v1", Name: "docker.io/library/my-trainer:v1", ID: "sha256:" + strings.Repeat("a", 64)}
	for _, tc := range []struct {
		name string
		have map[string]string
		want bool
	}{
		{"the tag names the image of that ID", map[string]string{"docker.io/library/my-trainer:v1": "sha256:m1", img.ID: "sha256:m1"}, true},
		{"the tag names an older build", map[string]string{"docker.io/library/my-trainer:v1": "sha256:m0", img.ID: "sha256:m1"}, false},
		{"the ID is there under no such tag", map[string]string{img.ID: "sha256:m1"}, false},
		{"the tag, and no reference of the ID", map[string]string{"docker.io/library/my-trainer:v1": "sha256:m1"}, false},
		{"nothing", map[string]string{}, false},
	} {
		if got := Holds(tc.have, img); got != tc.want {
			t.Errorf("%s: Holds %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fakeDocker puts on PATH a docker that answers `image inspect` as the engine would, holding the
// images of held (a full name, as docker prints tags: familiar) with their IDs.
func fakeDocker(t *testing.T, held map[string]string, down bool) {
	t.Helper()
	var script strings.Builder
	script.WriteString("#!/bin/sh\n[ \"$1 $2\" = 'image inspect' ] || { echo \"unexpected: $*\" >&2; exit 3; }\n")
	if down {
		script.WriteString("echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2; exit 1\n")
	}
	script.WriteString("shift 4; rc=0\nfor ref; do case \"$ref\" in\n")
	for full, id := range held {
		familiar := strings.TrimPrefix(strings.TrimPrefix(full, "docker.io/"), "library/")
		fmt.Fprintf(&script, "  %s) echo '[\"%s\"] %s';;\n", full, familiar, id)
	}
	script.WriteString("  *) echo \"Error response from daemon: No such image: $ref\" >&2; rc=1;;\nesac; done\nexit $rc\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestInEngine(t *testing.T) {
	id1, id2 := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	fakeDocker(t, map[string]string{"docker.io/library/my-trainer:v1": id1, "example.com/eval:v2": id2}, false)
	got, err := InEngine(context.Background(), []string{"example.com/eval:v2", "missing:v1", "mlkube/trainer:dev", "docker.io/library/my-trainer:v1", "my-trainer:v1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Image{
		{Ref: "example.com/eval:v2", Name: "example.com/eval:v2", ID: id2},
		{Ref: "docker.io/library/my-trainer:v1", Name: "docker.io/library/my-trainer:v1", ID: id1},
		{Ref: "my-trainer:v1", Name: "docker.io/library/my-trainer:v1", ID: id1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("InEngine =\n%+v\nwant\n%+v", got, want)
	}

	// Nothing loadable: docker is not even asked (the fake would fail on anything).
	if got, err := InEngine(context.Background(), []string{"mlkube/trainer:dev"}); err != nil || got != nil {
		t.Errorf("only our own image: %v, %v; want nothing asked", got, err)
	}

	fakeDocker(t, nil, true)
	if _, err := InEngine(context.Background(), []string{"my-trainer:v1"}); err == nil || !strings.Contains(err.Error(), "Cannot connect to the Docker daemon") {
		t.Errorf("an engine that does not answer: %v, want its error", err)
	}
}

// BenchmarkCheck is what devctl run spends finding that there is nothing to load, on a real
// cluster: MLKUBE_BENCH_CLUSTER names a kind cluster whose pod nodes hold MLKUBE_BENCH_IMAGE, an
// image of the local Docker engine (devctl load it first). Without them it is skipped.
func BenchmarkCheck(b *testing.B) {
	cluster, image := os.Getenv("MLKUBE_BENCH_CLUSTER"), os.Getenv("MLKUBE_BENCH_IMAGE")
	if cluster == "" || image == "" {
		b.Skip("MLKUBE_BENCH_CLUSTER and MLKUBE_BENCH_IMAGE are unset")
	}
	c := kindcluster.New(cluster, kindcmd.NewLogger())
	for _, bc := range []struct {
		name  string
		refs  []string
		local int
	}{
		// The samples: devctl up's own images only, so Docker is not even asked.
		{"ours only", []string{"mlkube/trainer:dev"}, 0},
		// An image neither built nor pulled: one docker image inspect.
		{"not in Docker", []string{"example.com/not-built-here:v1"}, 0},
		// An image from Docker the nodes hold: that, and one ctr images list per pod node.
		{"in Docker, on the nodes", []string{image, "mlkube/trainer:dev"}, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := Check(context.Background(), c, bc.refs)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Local) != bc.local || len(p.Load) != 0 {
					b.Fatalf("%d images in Docker, %d to load; want %d and none (devctl load --name %s %s first)", len(p.Local), len(p.Load), bc.local, cluster, image)
				}
			}
		})
	}
	// What devctl run waits for when its memory says the nodes hold the image: Glance.
	b.Run("in Docker, on the nodes, remembered", func(b *testing.B) {
		p, err := Check(context.Background(), c, []string{image})
		if err != nil || len(p.Load) != 0 {
			b.Fatalf("%v; %d images to load (devctl load --name %s %s first)", err, len(p.Load), cluster, image)
		}
		_, pods, err := Glance(context.Background(), c, []string{image})
		if err != nil {
			b.Fatal(err)
		}
		mem := OpenMemory(filepath.Join(b.TempDir(), "loaded.json"))
		mem.Learn(pods, p)
		for b.Loop() {
			local, pods, err := Glance(context.Background(), c, []string{image, "mlkube/trainer:dev"})
			if err != nil {
				b.Fatal(err)
			}
			if !mem.Covers(pods, local) {
				b.Fatal("the memory does not cover what the listing found")
			}
		}
	})
}

func TestMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loaded", "c.json")
	v1 := Image{Ref: "my-trainer:v1", Name: "docker.io/library/my-trainer:v1", ID: "sha256:" + strings.Repeat("1", 64)}
	v1b := Image{Ref: v1.Ref, Name: v1.Name, ID: "sha256:" + strings.Repeat("b", 64)} // rebuilt
	eval := Image{Ref: "eval:v1", Name: "docker.io/library/eval:v1", ID: "sha256:" + strings.Repeat("e", 64)}
	w1, w2 := kindcluster.NodeContainer{ID: "id-w1", Name: "c-worker"}, kindcluster.NodeContainer{ID: "id-w2", Name: "c-worker2"}
	pods := []kindcluster.NodeContainer{w1, w2}

	m := OpenMemory(path) // no file yet: empty
	if m.Covers(pods, []Image{v1}) {
		t.Fatal("an empty memory covers an image")
	}
	// A listing: worker holds v1, worker2 lacks it; then worker2 gets it loaded.
	m.Learn(pods, &Plan{Holding: map[string][]Image{"c-worker": {v1}}, Lacking: map[string][]Image{"c-worker2": {v1}}})
	if m.Covers(pods, []Image{v1}) {
		t.Error("covers v1 while worker2 lacks it")
	}
	m.Loaded(pods, []string{"c-worker2"}, []Image{v1})
	if !m.Covers(pods, []Image{v1}) {
		t.Error("does not cover v1 once worker2 has it loaded")
	}
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}

	m = OpenMemory(path) // what the next devctl run reads
	switch {
	case !m.Covers(pods, []Image{v1}):
		t.Error("the saved memory lost v1")
	case m.Covers(pods, []Image{v1b}):
		t.Error("covers a rebuild of v1 (another image ID)")
	case m.Covers(pods, []Image{v1, eval}):
		t.Error("covers an image never seen")
	case m.Covers([]kindcluster.NodeContainer{{ID: "id-new", Name: "c-worker"}, w2}, []Image{v1}):
		t.Error("covers a node created again under the same name")
	case (*Memory)(nil).Covers(pods, []Image{v1}):
		t.Error("no memory covers v1")
	}

	// A listing that finds v1 gone from worker (the kubelet collected it) forgets it there, and a
	// node no longer in the cluster is forgotten.
	m.Learn([]kindcluster.NodeContainer{w1}, &Plan{Lacking: map[string][]Image{"c-worker": {v1}}})
	if m.Covers([]kindcluster.NodeContainer{w1}, []Image{v1}) || len(m.Nodes) != 1 {
		t.Errorf("after a listing that found v1 gone: %v", m.Nodes)
	}

	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := OpenMemory(path); m.Covers(pods, []Image{v1}) || m.Nodes == nil {
		t.Error("a memory that does not read is not empty")
	}
}

// A job that waits on an image the engine lacks too gets told to build or pull it there; one
// the engine holds, or a wait on something else, gets nothing.
func TestWaitingHint(t *testing.T) {
	fakeDocker(t, map[string]string{"docker.io/library/my-trainer:v1": "sha256:" + strings.Repeat("1", 64)}, false)
	absent := "worker-0..1: cannot pull example.com/absent:v1: failed to pull and unpack image \"example.com/absent:v1\": not found"
	if got := WaitingHint("ImagePullBackOff", absent); !strings.HasPrefix(got, "example.com/absent:v1 is not in the local Docker engine either: docker build it") || !strings.Contains(got, "docker push localhost:5001/") {
		t.Errorf("absent image: hint %q", got)
	}
	never := `worker-0: Container image "example.com/absent:v1" is not present with pull policy of Never`
	if got := WaitingHint("ErrImageNeverPull", never); !strings.Contains(got, "devctl load example.com/absent:v1") {
		t.Errorf("never-pull of an absent image: hint %q", got)
	}
	if got := WaitingHint("ImagePullBackOff", "worker-0: cannot pull my-trainer:v1: not found"); got != "" {
		t.Errorf("an image the engine holds: hint %q", got)
	}
	if got := WaitingHint("Unschedulable", "worker-0: cannot be scheduled: 0/1 nodes are available"); got != "" {
		t.Errorf("a wait on no image: hint %q", got)
	}
}
