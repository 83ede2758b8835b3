//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// A job with spec.tensorboard gets its TensorBoard Deployment and Service, and its status the
// link, which devctl run prints. TensorBoard's own image cannot be pulled offline, so the job
// names the stand-in devctl builds (samples/tensorboard-standin: an HTTP server over the log
// directory, not TensorBoard): the Deployment becomes available, status.tensorboard.ready turns
// true, and the apiserver proxy path in the status answers with the event files the master
// wrote into the directory TensorBoard reads.
func TestRunWithTensorBoard(t *testing.T) {
	c, cfg := clusterClient(t)
	ns := newNamespace(t, c, "tensorboard")
	// The node's folder both pods mount (one node: a hostPath is shared); the master writes
	// its events as root, as in samples/tfjob-tensorboard.yaml.
	hostDir := "/tmp/mlkube-logs-" + ns
	file := manifest(t, tensorboardJob("tb", hostDir))
	r := devctlRun(t, "run", file, "-n", ns)
	if r.code != 0 {
		t.Fatalf("devctl run exited %d, want 0", r.code)
	}
	url := "http://tb-tensorboard." + ns + ".svc"
	proxy := "/api/v1/namespaces/" + ns + "/services/tb-tensorboard:80/proxy/"
	contains(t, "devctl run's output", r.out, "tfjob     TensorBoard at "+url+" in the cluster; from here: kubectl proxy, then http://127.0.0.1:8001"+proxy)
	job := getJob(t, c, ns, "tb")
	if tb := job.Status.Tensorboard; tb == nil || tb.URL != url || tb.ProxyPath != proxy || tb.ServiceName != "tb-tensorboard" {
		t.Fatalf("status.tensorboard %+v", job.Status.Tensorboard)
	}
	var dep appsv1.Deployment
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "tb-tensorboard"}, &dep))
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(args, "--logdir /logs/tb") {
		t.Errorf("TensorBoard runs %q", args)
	}
	var svc corev1.Service
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "tb-tensorboard"}, &svc))
	if metav1.GetControllerOf(&svc) == nil || metav1.GetControllerOf(&svc).UID != job.UID {
		t.Errorf("the TensorBoard Service is not the job's")
	}

	start := time.Now()
	eventually(t, 2*time.Minute, "status.tensorboard.ready", func() error {
		if tb := getJob(t, c, ns, "tb").Status.Tensorboard; tb == nil || !tb.Ready {
			return fmt.Errorf("status.tensorboard %+v", tb)
		}
		return nil
	})
	timing("TensorBoard stand-in: the job's end to status.tensorboard.ready", time.Since(start))

	// Through the apiserver's proxy, as a user's browser would go through kubectl proxy.
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	ctx := context.Background()
	page, err := cs.CoreV1().RESTClient().Get().AbsPath(proxy).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s: %v", proxy, err)
	}
	if !strings.Contains(string(page), "TensorBoard stand-in") {
		t.Errorf("GET %s answered:\n%s", proxy, page)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(proxy + "data/files").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %sdata/files: %v", proxy, err)
	}
	var files []struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
	if err := json.Unmarshal(raw, &files); err != nil {
		t.Fatalf("GET %sdata/files: %v\n%s", proxy, err, raw)
	}
	master := false
	for _, f := range files {
		master = master || (strings.HasPrefix(f.Path, "events.out.tfevents.") && strings.HasSuffix(f.Path, ".tb-master-0") && f.Size > 0)
	}
	if !master {
		t.Errorf("TensorBoard lists no event file of the master's: %s", raw)
	}
}

// tensorboardJob is a TfJob named name whose master writes event files into hostDir on its node,
// and whose TensorBoard, the stand-in, reads them from there (one node: a hostPath is shared).
func tensorboardJob(name, hostDir string) string {
	return fmt.Sprintf(`
apiVersion: mlkube.io/v1beta1
kind: TfJob
metadata:
  name: %[2]s
spec:
  tensorboard:
    logDir: /logs/%[2]s
    image: mlkube/tensorboard-standin:dev
    volumes:
    - {name: logs, hostPath: {path: %[1]s, type: DirectoryOrCreate}}
    volumeMounts:
    - {name: logs, mountPath: /logs, readOnly: true}
  replicaSpecs:
  - tfReplicaType: MASTER
    template:
      spec:
        securityContext: {runAsUser: 0}
        volumes:
        - {name: logs, hostPath: {path: %[1]s, type: DirectoryOrCreate}}
        containers:
        - name: tensorflow
          image: mlkube/trainer:dev
          imagePullPolicy: IfNotPresent
          args: [--logdir=/logs/%[2]s, --step-delay=20ms]
          volumeMounts:
          - {name: logs, mountPath: /logs}
  - tfReplicaType: WORKER
    template:
      spec:`+trainer("--step-delay=20ms")+`
`, hostDir, name)
}
