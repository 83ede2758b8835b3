//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownImage is a trainer image devctl's own builder never saw: built with docker build into the
// local Docker engine only, as a user builds theirs.
const ownImage = "example.com/my-trainer:v1"

// A trainer of your own: the sample trainer built with go build and wrapped by docker build in
// a FROM scratch image, named by a TfJob with imagePullPolicy IfNotPresent. devctl run loads it
// into the node and the job succeeds; run again with nothing changed, it loads nothing; built
// again differently under the same tag, devctl run --watch loads the new image ID and runs the
// job again. Each time the pod runs exactly the image the engine has.
func TestRunLoadsYourOwnImage(t *testing.T) {
	c, _ := clusterClient(t)
	ns := newNamespace(t, c, "own-image")
	dir := t.TempDir()
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ownImage).Run() })
	id1 := buildOwnImage(t, dir)
	file := manifest(t, `
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: own
spec:
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:`+ownTrainer()+`
  - tfReplicaType: WORKER
    template:
      spec:`+ownTrainer()+`
`)

	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	matches(t, "devctl run's output", r.out,
		`(?m)^• Loading images from Docker into the nodes \.\.\.$`,
		`(?m)^  • writing the archive of `+ownImage+` \.\.\.$`,
		`(?m)^  ✓ loading it into node `+name+`-control-plane \([0-9.]+s\)$`,
		`(?m)^✓ Loaded `+ownImage+` \(image `+short(id1)+`\) from Docker into 1 node\(s\) \([0-9.]+s\)$`,
		`(?m)^tfjob/own Succeeded in [0-9.]+s`)
	if loaded, ok := r.when("✓ Loaded "); ok {
		timing("devctl run of a job naming an image only in Docker (10 MB): to the image loaded", loaded)
	}
	ranImage(t, c, ns, id1)

	// Nothing changed: nothing is loaded, nothing said about images.
	r = devctlRun(t, "run", file, "-n", ns, "--replace")
	if r.code != 0 {
		t.Fatalf("devctl run --replace exited %d, want 0", r.code)
	}
	if strings.Contains(r.out, "Loading images") || strings.Contains(r.out, "warning") {
		t.Errorf("the second run, with the image on the node, loaded or warned")
	}
	out, _, err := run(t, "load", "--name", name, ownImage)
	if err != nil || !strings.Contains(out, "✓ "+ownImage+" (image "+short(id1)+") already on the node") {
		t.Errorf("devctl load of an image on the node: %v", err)
	}

	// --watch: a rebuild under the same tag (stripped, so another binary) runs the job again.
	w := startWatch(t, "run", file, "-n", ns, "--watch", "--replace")
	w.waitFor(t, 3*time.Minute, "tfjob/own Succeeded in", 1)
	id2 := buildOwnImage(t, dir, "-s", "-w")
	if id2 == id1 {
		t.Fatalf("the stripped build has the same image ID %s", id1)
	}
	w.waitFor(t, time.Minute, ownImage+" (image "+short(id1)+" -> "+short(id2)+") changed in Docker: submitting", 1)
	w.waitFor(t, 3*time.Minute, "tfjob/own Succeeded in", 2)
	out = w.stop(t)
	if !strings.Contains(out, "✓ Loaded "+ownImage+" (image "+short(id2)+") from Docker into 1 node(s)") {
		t.Errorf("--watch did not load the rebuilt image %s", short(id2))
	}
	ranImage(t, c, ns, id2)
}

// ownTrainer is a replica's container running the own image.
func ownTrainer() string {
	return `
        containers:
        - name: tensorflow
          image: ` + ownImage + `
          imagePullPolicy: IfNotPresent
          args: [--step-delay=20ms]`
}

// buildOwnImage builds the sample trainer statically with the extra linker flags and wraps it
// with docker build in a FROM scratch image, ownImage; it returns the image ID.
func buildOwnImage(t *testing.T, dir string, ldflags ...string) string {
	t.Helper()
	build := exec.Command("go", "build", "-trimpath", "-ldflags="+strings.Join(ldflags, " "), "-o", filepath.Join(dir, "trainer"), "../samples/trainer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the trainer: %v\n%s", err, out)
	}
	dockerfile := "FROM scratch\nCOPY trainer /trainer\nENTRYPOINT [\"/trainer\"]\n"
	must(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644))
	if out, err := exec.Command("docker", "build", "-q", "-t", ownImage, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", ownImage).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", ownImage, err)
	}
	id := strings.TrimSpace(string(out))
	t.Logf("built %s, image %s", ownImage, id)
	return id
}

func short(id string) string { return strings.TrimPrefix(id, "sha256:")[:12] }

// ranImage checks that the job's master ran the image of Docker's image ID id: on the node, the
// tag and containerd's reference of that ID name one manifest, and the pod ran that manifest.
func ranImage(t *testing.T, c client.Client, ns, id string) {
	t.Helper()
	out, err := exec.Command("docker", "exec", name+"-control-plane", "ctr", "-n", "k8s.io", "images", "list").Output()
	if err != nil {
		t.Fatalf("listing the node's images: %v", err)
	}
	manifests := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			manifests[f[0]] = f[2]
		}
	}
	manifest := manifests[id]
	if manifest == "" || manifests[ownImage] != manifest {
		t.Fatalf("on the node, %s names manifest %q and image %s manifest %q; want one and the same", ownImage, manifests[ownImage], short(id), manifest)
	}
	var pod corev1.Pod
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "own-master-0"}, &pod))
	if len(pod.Status.ContainerStatuses) == 0 || !strings.HasSuffix(pod.Status.ContainerStatuses[0].ImageID, "@"+manifest) {
		t.Errorf("the master ran %+v, want manifest %s (image %s)", pod.Status.ContainerStatuses, manifest, short(id))
	}
}

// watching is a devctl command left running, its output collected.
type watching struct {
	cmd *exec.Cmd
	out *lineClock
}

func startWatch(t *testing.T, args ...string) *watching {
	t.Helper()
	w := &watching{cmd: exec.Command(devctl, args...), out: &lineClock{start: time.Now()}}
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cmd.Process.Kill() })
	return w
}

// waitFor waits until the output holds s n times.
func (w *watching) waitFor(t *testing.T, timeout time.Duration, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.out.mu.Lock()
		count := bytes.Count(w.out.all.Bytes(), []byte(s))
		w.out.mu.Unlock()
		if count >= n {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	t.Fatalf("no %q (%d times) after %s; devctl said:\n%s", s, n, timeout, w.out.all.String())
}

// stop ends the command with Ctrl-C, checks it exits 0 as --watch does, and returns its output.
func (w *watching) stop(t *testing.T) string {
	t.Helper()
	must(t, w.cmd.Process.Signal(syscall.SIGINT))
	err := w.cmd.Wait()
	w.out.mu.Lock()
	out := w.out.all.String()
	w.out.mu.Unlock()
	t.Logf("$ devctl %s  (%.1fs, %v)\n%s", strings.Join(w.cmd.Args[1:], " "), time.Since(w.out.start).Seconds(), err, out)
	if err != nil {
		t.Errorf("devctl --watch after Ctrl-C: %v, want exit 0", err)
	}
	return out
}
