//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/accelerator"
)

// nodeprobe, as devctl up deployed it, in the kind cluster: on the node as it is (no GPU), then
// with a fake NVIDIA driver put into the node and a fake nvidia.com/gpu advertised on it. The
// fake driver's libnvidia-ml is nodeprobe's test stand-in (testdata/fake_nvml.c), built here
// with gcc: the node runs Debian bookworm, as this machine does, so it loads there. Everything
// put into the node is taken out again at the end, and the accelerator config restored.

const (
	gpuResource       = corev1.ResourceName("nvidia.com/gpu")
	fakeDriverVersion = "550.54.15"
	// fakeLibDir is where Debian's packages and NVIDIA's installer put the driver's libraries.
	fakeLibDir = "/usr/lib/x86_64-linux-gnu"
)

var (
	acceleratorsKey = types.NamespacedName{Namespace: "mlkube-system", Name: "mlkube-accelerators"}
)

// gpuReport is nodeprobe's node annotation.
type gpuReport struct {
	GPU           bool     `json:"gpu"`
	Reason        string   `json:"reason"`
	DriverVersion string   `json:"driverVersion"`
	GPUs          int      `json:"gpus"`
	Models        []string `json:"models"`
	Layout        string   `json:"layout"`
}

func TestNodeprobe(t *testing.T) {
	ctx := context.Background()
	c, cfg := clusterClient(t)
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	var nodes corev1.NodeList
	must(t, c.List(ctx, &nodes))
	if len(nodes.Items) != 1 {
		t.Fatalf("%d nodes, want the one node of clusters/kind.yaml", len(nodes.Items))
	}
	node := nodes.Items[0].Name // kind's node container has the node's name
	var original corev1.ConfigMap
	must(t, c.Get(ctx, acceleratorsKey, &original))

	t.Run("a node without a GPU", func(t *testing.T) {
		pod := nodeprobePod(t, c, node, "")
		eventually(t, time.Minute, "node "+node+" annotated as without a GPU", func() error {
			r, err := report(ctx, c, node)
			if err != nil {
				return err
			}
			if r.GPU || !strings.Contains(r.Reason, "no NVIDIA driver found on this node; looked in: /etc/ld.so.cache, /usr/lib/x86_64-linux-gnu") {
				return fmt.Errorf("annotation %+v, want gpu false and the places looked in", r)
			}
			return nil
		})
		if log := podLog(t, cs, pod, nil); !strings.Contains(log, `"probed: no GPU"`) {
			t.Errorf("nodeprobe's log does not say it found no GPU:\n%s", log)
		}
		// The config the operator reads is as the operator's manifests made it: nodeprobe on a
		// node without a GPU never writes it.
		var cm corev1.ConfigMap
		must(t, c.Get(ctx, acceleratorsKey, &cm))
		parsed, err := accelerator.Parse([]byte(cm.Data["accelerators.yaml"]))
		if err != nil {
			t.Errorf("accelerators.yaml no longer parses: %v\n%s", err, cm.Data["accelerators.yaml"])
		} else if len(parsed.Accelerators) != 0 {
			t.Errorf("accelerators.yaml configures %v on a cluster without a GPU", parsed.Accelerators)
		}
		if keys := slices.Sorted(maps.Keys(cm.Data)); !slices.Equal(keys, []string{"accelerators.yaml"}) {
			t.Errorf("ConfigMap keys %v, want accelerators.yaml alone", keys)
		}
		out, _, err := run(t, "status", "--name", name)
		must(t, err)
		matches(t, "devctl status", out, `(?m)^nodeprobe +Ready, 1/1 nodes ready`, `(?m)^GPUs +no GPU found on any node \(1 of 1 probed\)`)
	})

	t.Run("a fake driver and a fake GPU", func(t *testing.T) {
		fakeGPU(t, ctx, c, cs, node, original)
	})
}

// fakeDriver is the fake driver's files, built here with gcc: nodeprobe's stand-in for
// libnvidia-ml (testdata/fake_nvml.c), and stand-ins for libcuda and nvidia-smi
// (testdata/gpuimage), real ELF files that a container's dynamic loader loads and runs.
type fakeDriver struct{ nvml, cuda, smi string }

func buildFakeDriver(t *testing.T) fakeDriver {
	t.Helper()
	dir := t.TempDir()
	d := fakeDriver{
		nvml: filepath.Join(dir, "libnvidia-ml.so."+fakeDriverVersion),
		cuda: filepath.Join(dir, "libcuda.so."+fakeDriverVersion),
		smi:  filepath.Join(dir, "nvidia-smi"),
	}
	gcc(t, "-shared", "-fPIC", "-o", d.nvml, "../nodeprobe/cmd/nodeprobe/testdata/fake_nvml.c")
	gcc(t, "-shared", "-fPIC", "-o", d.cuda, "testdata/gpuimage/fake_cuda.c")
	gcc(t, "-o", d.smi, "testdata/gpuimage/fake_nvidia_smi.c")
	return d
}

func gcc(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("gcc", append([]string{"-Wall", "-Werror"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// putFakeDriver puts the fake driver into the node as its installer and ldconfig leave it: real
// files under the full version, SONAME links beside them, the tool nvidia-smi. libDir and binDir
// are where: Debian's packages use /usr/lib/x86_64-linux-gnu and /usr/bin, GKE's installer
// /home/kubernetes/bin/nvidia/lib64 and .../bin.
func putFakeDriver(t *testing.T, node string, d fakeDriver, libDir, binDir string) {
	t.Helper()
	docker(t, "exec", node, "mkdir", "-p", libDir, binDir)
	docker(t, "cp", d.nvml, node+":"+libDir+"/")
	docker(t, "cp", d.cuda, node+":"+libDir+"/")
	docker(t, "cp", d.smi, node+":"+binDir+"/")
	docker(t, "exec", node, "sh", "-ec", `cd `+libDir+`
chmod 0755 libnvidia-ml.so.`+fakeDriverVersion+` libcuda.so.`+fakeDriverVersion+` `+binDir+`/nvidia-smi
ln -sf libnvidia-ml.so.`+fakeDriverVersion+` libnvidia-ml.so.1
ln -sf libcuda.so.`+fakeDriverVersion+` libcuda.so.1`)
}

func fakeGPU(t *testing.T, ctx context.Context, c client.Client, cs kubernetes.Interface, node string, original corev1.ConfigMap) {
	driver := buildFakeDriver(t)
	start := time.Now()
	t.Cleanup(func() { removeFakeGPU(t, c, node, original) })
	putFakeDriver(t, node, driver, fakeLibDir, "/usr/bin")
	advertiseGPU(t, ctx, c, node)
	advertised := time.Now()

	// nodeprobe probes every 5 minutes; a new pod probes at once.
	old := nodeprobePod(t, c, node, "")
	must(t, c.Delete(ctx, &old))
	probe := nodeprobePod(t, c, node, old.UID)

	var r gpuReport
	eventually(t, time.Minute, "node "+node+" annotated with the fake driver", func() error {
		var err error
		if r, err = report(ctx, c, node); err != nil {
			return err
		}
		if !r.GPU || r.DriverVersion != fakeDriverVersion || r.GPUs != 2 || !slices.Equal(r.Models, []string{"Fake NVIDIA H100 80GB HBM3"}) || r.Reason != "" {
			return fmt.Errorf("annotation %+v, want the fake driver %s answering with 2 GPUs", r, fakeDriverVersion)
		}
		return nil
	})
	var published *accelerator.Config
	eventually(t, 30*time.Second, "the fake driver's config published", func() error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, acceleratorsKey, &cm); err != nil {
			return err
		}
		var err error
		if published, err = accelerator.Parse([]byte(cm.Data["accelerators.yaml"])); err != nil {
			return err
		}
		if err := fakeDriverConfig(published); err != nil {
			return fmt.Errorf("%v\n%s", err, cm.Data["accelerators.yaml"])
		}
		if !strings.Contains(cm.Data["layouts.yaml"], node) || !strings.Contains(cm.Data["layouts.yaml"], r.Layout) {
			return fmt.Errorf("layouts.yaml does not record node %s with layout %s:\n%s", node, r.Layout, cm.Data["layouts.yaml"])
		}
		return nil
	})
	timing("nodeprobe: fake driver in the node to its config published (pod restart)", time.Since(start))
	if log := podLog(t, cs, probe, nil); !strings.Contains(log, `"accelerator config updated"`) || !strings.Contains(log, "NVIDIA driver "+fakeDriverVersion+" (CUDA 12.4), 2 GPU(s)") {
		t.Errorf("nodeprobe's log does not tell what it found and published:\n%s", log)
	}

	operatorReloads(t, ctx, c, cs)

	// A GPU job: its container runs nodeprobe detect on its own root, where the operator mounted
	// the driver, and reports what it sees there.
	jobStart := time.Now()
	pod, log := runGPUJob(t, ctx, c, cs, node, newNamespace(t, c, "gpu"), corev1.Container{
		Name: "tensorflow", Image: "mlkube/nodeprobe:dev", ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/nodeprobe", "detect", "--driver-root", "/"},
	})
	timing("nodeprobe: GPU TfJob (nodeprobe detect in the container) to Succeeded", time.Since(jobStart))
	checkDriverMounts(t, pod, published)

	// The kubelet recomputes the node's status every 10s: two rounds later, the resource it did
	// not set is still there.
	time.Sleep(time.Until(advertised.Add(25 * time.Second)))
	var n corev1.Node
	must(t, c.Get(ctx, types.NamespacedName{Name: node}, &n))
	if q := n.Status.Allocatable[gpuResource]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("%s allocatable on node %s %s after %s, want 1: the kubelet dropped it", gpuResource, node, q.String(), time.Since(advertised).Round(time.Second))
	}
	matches(t, "nodeprobe detect in the GPU container", log,
		`(?m)^Driver:\s+`+regexp.QuoteMeta(fakeDriverVersion)+` \(CUDA 12\.4\)$`,
		`(?m)^NVML:\s+/usr/lib/x86_64-linux-gnu/libnvidia-ml\.so\.1$`,
		`(?m)^GPUs: 2$`,
		`(?m)^  0\s+Fake NVIDIA H100 80GB HBM3\s+GPU-fa4e0000-0000-0000-0000-000000000000\s+81559 MiB$`,
		`(?m)^  libnvidia-ml\.so\.1\s+/usr/lib/x86_64-linux-gnu/libnvidia-ml\.so\.1\s+\(`,
		`(?m)^  libcuda\.so\.1\s+/usr/lib/x86_64-linux-gnu/libcuda\.so\.1\s+\(nvml-dir\)$`,
		`(?m)^  nvidia-smi\s+/usr/bin/nvidia-smi\s+\(search\)$`,
	)
	if t.Failed() {
		t.Logf("the GPU container's log:\n%s", log)
	}

	t.Run("an image's own env", func(t *testing.T) { imagesOwnEnv(t, ctx, c, cs, node) })

	// A second devctl up keeps what nodeprobe published: the operator's manifests ship the
	// ConfigMap empty, and applying them again must not take it back.
	out, _, err := run(t, "up", "--name", name, "--image", nodeImage)
	if err != nil {
		t.Fatalf("devctl up: %v", err)
	}
	contains(t, "devctl up with nodeprobe's config published", out, "kept the accelerator config (nodeprobe's)")
	matches(t, "devctl up with nodeprobe's config published", out, `(?m)^✓ nodeprobe (already )?running mlkube/nodeprobe:`)
	var cm corev1.ConfigMap
	must(t, c.Get(ctx, acceleratorsKey, &cm))
	if kept, err := accelerator.Parse([]byte(cm.Data["accelerators.yaml"])); err != nil || fakeDriverConfig(kept) != nil {
		t.Errorf("after devctl up, accelerators.yaml is:\n%s", cm.Data["accelerators.yaml"])
	}

	out, _, err = run(t, "status", "--name", name)
	must(t, err)
	matches(t, "devctl status", out, `(?m)^GPUs +`+regexp.QuoteMeta("configured: nvidia.com/gpu (5 mounts, 0 env vars); GPU nodes: "+node+" (driver "+fakeDriverVersion+", 2 GPU(s), driver mounted by mlkube)"))
}

// fakeDriverConfig checks that cfg mounts the fake driver's files, each on its own (the
// directories are the node's system directories) into the image's own directories, libraries
// into both families' library directories, and sets no env.
func fakeDriverConfig(cfg *accelerator.Config) error {
	gpu, ok := cfg.Accelerators[string(gpuResource)]
	if !ok || len(cfg.Accelerators) != 1 {
		return fmt.Errorf("config for %v, want %s alone", slices.Sorted(maps.Keys(cfg.Accelerators)), gpuResource)
	}
	var mounts []string
	for _, v := range gpu.Volumes {
		mounts = append(mounts, v.HostPath+" -> "+v.MountPath)
	}
	want := []string{
		fakeLibDir + "/libnvidia-ml.so.1 -> /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", fakeLibDir + "/libnvidia-ml.so.1 -> /usr/lib64/libnvidia-ml.so.1",
		fakeLibDir + "/libcuda.so.1 -> /usr/lib/x86_64-linux-gnu/libcuda.so.1", fakeLibDir + "/libcuda.so.1 -> /usr/lib64/libcuda.so.1",
		"/usr/bin/nvidia-smi -> /usr/bin/nvidia-smi",
	}
	if !slices.Equal(mounts, want) {
		return fmt.Errorf("mounts %q, want %q", mounts, want)
	}
	if len(gpu.EnvVars) > 0 {
		return fmt.Errorf("env vars %v: a GPU container must keep its image's own", gpu.EnvVars)
	}
	return nil
}

// checkDriverMounts checks that the operator gave the GPU container the published volumes,
// read-only, and left its env alone.
func checkDriverMounts(t *testing.T, pod corev1.Pod, cfg *accelerator.Config) {
	t.Helper()
	want := cfg.Accelerators[string(gpuResource)]
	ctr := pod.Spec.Containers[0]
	for _, v := range want.Volumes {
		i := slices.IndexFunc(pod.Spec.Volumes, func(pv corev1.Volume) bool { return pv.Name == v.Name })
		if i < 0 || pod.Spec.Volumes[i].HostPath == nil || pod.Spec.Volumes[i].HostPath.Path != v.HostPath {
			t.Errorf("the GPU pod has no hostPath volume %s of %s: %+v", v.Name, v.HostPath, pod.Spec.Volumes)
			continue
		}
		j := slices.IndexFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name && m.MountPath == v.MountPath })
		if j < 0 || !ctr.VolumeMounts[j].ReadOnly {
			t.Errorf("the GPU container does not mount %s read-only at %s: %+v", v.Name, v.MountPath, ctr.VolumeMounts)
		}
	}
	for _, e := range ctr.Env {
		if e.Name == "PATH" || e.Name == "LD_LIBRARY_PATH" {
			t.Errorf("the GPU container got %s=%s, which replaces its image's own", e.Name, e.Value)
		}
	}
}

// operatorReloads makes the kubelet refresh the operator's mounted ConfigMap now rather than at
// its next periodic sync (up to a minute and more): a change to the pod makes the kubelet sync
// it. It waits until the operator says it loaded the GPU config.
func operatorReloads(t *testing.T, ctx context.Context, c client.Client, cs kubernetes.Interface) {
	t.Helper()
	start := time.Now()
	since := metav1.NewTime(start.Add(-time.Second))
	op := onePod(t, c, "mlkube-system", "app.kubernetes.io/name=mlkube-operator")
	nudged := time.Time{}
	eventually(t, 2*time.Minute, "the operator to load the published config", func() error {
		if time.Since(nudged) > 15*time.Second {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"mlkube.io/e2e-resync":%q}}}`, time.Now().Format(time.RFC3339Nano))
			if err := c.Patch(ctx, &op, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return err
			}
			nudged = time.Now()
		}
		for _, line := range strings.Split(podLog(t, cs, op, &since), "\n") {
			if strings.Contains(line, "accelerator config loaded") && strings.Contains(line, string(gpuResource)) {
				return nil
			}
		}
		return fmt.Errorf("no \"accelerator config loaded\" for %s in its log since %s", gpuResource, since.Format(time.RFC3339))
	})
	timing("nodeprobe: published config to the operator using it (pod resync)", time.Since(start))
}

// removeFakeGPU takes out of the node what fakeGPU put in, has nodeprobe probe again (it finds
// no driver and drops the node's record), and restores the accelerator config as it was.
func removeFakeGPU(t *testing.T, c client.Client, node string, original corev1.ConfigMap) {
	ctx := context.Background()
	rm := []string{"exec", node, "rm", "-f", "/usr/bin/nvidia-smi"}
	for _, base := range []string{"libnvidia-ml.so", "libcuda.so"} {
		rm = append(rm, fakeLibDir+"/"+base+".1", fakeLibDir+"/"+base+"."+fakeDriverVersion)
	}
	if out, err := exec.Command("docker", rm...).CombinedOutput(); err != nil {
		t.Errorf("removing the fake driver from node %s: %v\n%s", node, err, out)
	}
	var n corev1.Node
	unadvertise := []byte(`{"status":{"capacity":{"nvidia.com/gpu":null},"allocatable":{"nvidia.com/gpu":null}}}`)
	if err := c.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		t.Errorf("reading node %s: %v", node, err)
	} else if err := c.Status().Patch(ctx, &n, client.RawPatch(types.MergePatchType, unadvertise)); err != nil {
		t.Errorf("removing %s from node %s: %v", gpuResource, node, err)
	}

	// A new nodeprobe finds no driver, annotates the node so and drops its record.
	old, err := findNodeprobePod(ctx, c, node, "")
	if err == nil {
		err = c.Delete(ctx, &old)
	}
	if err != nil {
		t.Errorf("restarting nodeprobe: %v", err)
	}
	waitFor(t, 2*time.Minute, "a new nodeprobe pod on node "+node, func() error {
		_, err := findNodeprobePod(ctx, c, node, old.UID)
		return err
	})
	waitFor(t, time.Minute, "nodeprobe to report node "+node+" without its fake driver", func() error {
		r, err := report(ctx, c, node)
		if err != nil {
			return err
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, acceleratorsKey, &cm); err != nil {
			return err
		}
		if r.GPU || strings.Contains(cm.Data["layouts.yaml"], node) {
			return fmt.Errorf("annotation %+v, layouts.yaml:\n%s", r, cm.Data["layouts.yaml"])
		}
		return nil
	})

	var cm corev1.ConfigMap
	if err := c.Get(ctx, acceleratorsKey, &cm); err != nil {
		t.Errorf("reading the accelerator config: %v", err)
		return
	}
	cm.Data = original.Data
	if err := c.Update(ctx, &cm); err != nil {
		t.Errorf("restoring the accelerator config: %v", err)
	}
	op := onePod(t, c, "mlkube-system", "app.kubernetes.io/name=mlkube-operator")
	if err := c.Patch(ctx, &op, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"mlkube.io/e2e-resync":null}}}`))); err != nil {
		t.Errorf("removing the resync annotation from the operator pod: %v", err)
	}
}

// waitFor is eventually for clean-ups: a timeout is an error, and the clean-up goes on.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("clean-up: %s: %v", what, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// advertiseGPU gives the node one nvidia.com/gpu, as a device plugin would.
func advertiseGPU(t *testing.T, ctx context.Context, c client.Client, node string) {
	t.Helper()
	var n corev1.Node
	must(t, c.Get(ctx, types.NamespacedName{Name: node}, &n))
	patch := []byte(`{"status":{"capacity":{"nvidia.com/gpu":"1"},"allocatable":{"nvidia.com/gpu":"1"}}}`)
	must(t, c.Status().Patch(ctx, &n, client.RawPatch(types.MergePatchType, patch)))
}

// nodeprobePod waits for nodeprobe's pod on the node to run and be ready, one other than the
// pod of UID notUID when that is set.
func nodeprobePod(t *testing.T, c client.Client, node string, notUID types.UID) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	eventually(t, 2*time.Minute, "nodeprobe's pod running on node "+node, func() error {
		var err error
		pod, err = findNodeprobePod(context.Background(), c, node, notUID)
		return err
	})
	return pod
}

func findNodeprobePod(ctx context.Context, c client.Client, node string, notUID types.UID) (corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("mlkube-nodeprobe"), client.MatchingLabels{"app.kubernetes.io/name": "nodeprobe"}); err != nil {
		return corev1.Pod{}, err
	}
	var seen []string
	for _, p := range pods.Items {
		seen = append(seen, fmt.Sprintf("%s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil || p.UID == notUID || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return p, nil
			}
		}
	}
	return corev1.Pod{}, fmt.Errorf("no new ready nodeprobe pod on %s among %v", node, seen)
}

func report(ctx context.Context, c client.Client, node string) (gpuReport, error) {
	var n corev1.Node
	var r gpuReport
	if err := c.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		return r, err
	}
	raw, ok := n.Annotations[accelerator.NodeAnnotation]
	if !ok {
		return r, fmt.Errorf("node %s has no %s annotation yet", node, accelerator.NodeAnnotation)
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("annotation %s: %v: %s", accelerator.NodeAnnotation, err, raw)
	}
	return r, nil
}

// podLog is the log of the pod's first container, since a time when one is given.
func podLog(t *testing.T, cs kubernetes.Interface, pod corev1.Pod, since *metav1.Time) string {
	t.Helper()
	raw, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{SinceTime: since}).DoRaw(context.Background())
	if err != nil {
		return fmt.Sprintf("(no log of %s/%s: %v)", pod.Namespace, pod.Name, err)
	}
	return string(raw)
}

func docker(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
