package progress_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/progress"
)

func TestMain(m *testing.M) { jobtest.Main(m, func() {}) }

// endpoint is an operator with its progress endpoint on a port of this machine, and the
// client a trainer of namespace ns would have: the namespace's CA bundle.
type endpoint struct {
	t      *testing.T
	ns     string
	base   string
	client *http.Client
}

func startEndpoint(t *testing.T, ns string) *endpoint {
	t.Helper()
	addr := make(chan net.Addr, 1)
	jobtest.StartOperator(t, ns, func(o *operator.Options) {
		o.ProgressBindAddress = "127.0.0.1:0"
		o.ProgressURL = "https://127.0.0.1"
		o.ProgressListening = func(a net.Addr) { addr <- a }
	})
	var a net.Addr
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the progress endpoint did not listen")
	}
	// The default service account, which the apiserver issues the pods' tokens for (envtest
	// runs no controller that makes it).
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	jobtest.Must(t, client.IgnoreAlreadyExists(jobtest.Client.Create(context.Background(), sa)))
	return &endpoint{t: t, ns: ns, base: "https://" + a.String()}
}

// trust builds the client from the CA bundle the operator wrote into the namespace.
func (e *endpoint) trust() {
	e.t.Helper()
	var cm corev1.ConfigMap
	jobtest.Eventually(e.t, "the namespace's CA bundle", func() error {
		return jobtest.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: progress.TrustConfigMap}, &cm)
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[progress.TrustKey])) {
		e.t.Fatalf("ConfigMap %s holds no CA: %q", progress.TrustConfigMap, cm.Data)
	}
	e.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
}

// token is a token the apiserver issues for pod, as the kubelet projects it.
func token(t *testing.T, ns string, pod corev1.Pod, audience string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(jobtest.Config)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "default", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences:      []string{audience},
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	jobtest.Must(t, err)
	return tr.Status.Token
}

// post sends body to the job's URL with token, and returns the status code and the reply.
func (e *endpoint) post(job, token, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.base+progress.PathPrefix+e.ns+"/tfjobs/"+job, strings.NewReader(body))
	jobtest.Must(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.client.Do(req)
	jobtest.Must(e.t, err)
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(reply))
}

func tfJob(ns, name string) *v1beta1.TfJob {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "trainer:v1"}}}}
	return &v1beta1.TfJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.TfJobSpec{ReplicaSpecs: []v1beta1.TfReplicaSpec{
			{TfReplicaType: v1beta1.TfReplicaMaster, Replicas: 1, Template: tmpl},
			{TfReplicaType: v1beta1.TfReplicaWorker, Replicas: 1, Template: tmpl},
		}},
	}
}

func createJob(t *testing.T, ns, name string) (master, worker corev1.Pod) {
	t.Helper()
	jobtest.Must(t, jobtest.Client.Create(context.Background(), tfJob(ns, name)))
	var pods map[string]corev1.Pod
	jobtest.Eventually(t, "the pods of "+name, func() error {
		pods = jobtest.ListPods(t, ns)
		if _, ok := pods[name+"-worker-0"]; !ok {
			return fmt.Errorf("no pod %s-worker-0", name)
		}
		if _, ok := pods[name+"-master-0"]; !ok {
			return fmt.Errorf("no pod %s-master-0", name)
		}
		return nil
	})
	return pods[name+"-master-0"], pods[name+"-worker-0"]
}

// A replica is told where to report, with a token of our audience and the CA; its report
// reaches status.progress, metrics in order, NaN kept.
func TestAReportReachesTheJobsStatus(t *testing.T) {
	ns := jobtest.Namespace(t)
	e := startEndpoint(t, ns)
	master, _ := createJob(t, ns, "train")
	c := master.Spec.Containers[0]
	env := map[string]string{}
	for _, v := range c.Env {
		env[v.Name] = v.Value
	}
	if env[progress.EnvURL] != "https://127.0.0.1"+progress.PathPrefix+ns+"/tfjobs/train" ||
		env[progress.EnvTokenFile] != progress.MountPath+"/token" || env[progress.EnvCAFile] != progress.MountPath+"/ca.crt" {
		t.Errorf("env %v", env)
	}
	var projected *corev1.ProjectedVolumeSource
	for _, v := range master.Spec.Volumes {
		if v.Name == progress.VolumeName {
			projected = v.Projected
		}
	}
	if projected == nil || projected.Sources[0].ServiceAccountToken == nil || projected.Sources[0].ServiceAccountToken.Audience != progress.Audience {
		t.Fatalf("no projected token of audience %s: %+v", progress.Audience, master.Spec.Volumes)
	}
	e.trust()

	code, reply := e.post("train", token(t, ns, master, progress.Audience),
		`{"step": 120, "totalSteps": 1000, "metrics": {"loss": NaN, "accuracy": 0.5}}`)
	if code != http.StatusNoContent {
		t.Fatalf("report: %d %s", code, reply)
	}
	job := jobtest.WaitJob[v1beta1.TfJob](t, ns, "train", "progress in status", func(j *v1beta1.TfJob) error {
		if j.Status.Progress == nil {
			return fmt.Errorf("no progress yet")
		}
		return nil
	})
	p := job.Status.Progress
	if p.Step != 120 || *p.TotalSteps != 1000 || *p.Percent != 12 || p.Summary != "12%" || p.Replica != "train-master-0" {
		t.Errorf("progress %+v", p)
	}
	if len(p.Metrics) != 2 || p.Metrics[0] != (v1beta1.Metric{Name: "loss", Value: "NaN"}) || p.Metrics[1] != (v1beta1.Metric{Name: "accuracy", Value: "0.5"}) {
		t.Errorf("metrics %+v, want loss NaN then accuracy 0.5", p.Metrics)
	}
}

// Only a pod of the job may report for it, with a token of our audience; a report too large,
// malformed or too frequent is refused with the reason, and changes nothing.
func TestReportsRefused(t *testing.T) {
	ns := jobtest.Namespace(t)
	e := startEndpoint(t, ns)
	master, _ := createJob(t, ns, "mine")
	other, _ := createJob(t, ns, "theirs")
	e.trust()
	// A pod of no job, labelled as the job's: the operator's cache holds it (it keeps the pods
	// with that label), and only its owner tells it apart.
	loner := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loner", Labels: map[string]string{v1beta1.LabelJobName: "mine"}},
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	jobtest.Must(t, jobtest.Client.Create(context.Background(), &loner))
	good := token(t, ns, master, progress.Audience)

	for _, c := range []struct {
		name, token, body string
		code              int
		says              string
	}{
		{"no token", "", `{"step": 1}`, 401, "no token"},
		{"another audience", token(t, ns, master, "vault"), `{"step": 1}`, 401, "audience " + progress.Audience},
		{"a pod of another job", token(t, ns, other, progress.Audience), `{"step": 1}`, 403, "pod theirs-master-0 is no replica of tfjob/mine"},
		{"a pod of no job", token(t, ns, loner, progress.Audience), `{"step": 1}`, 403, "pod loner is no replica of tfjob/mine"},
		{"too large", good, `{"step": 1, "pad": "` + strings.Repeat("x", progress.MaxReportBytes) + `"}`, 413, "over 4096 bytes"},
		{"malformed", good, `{"step": "ten"}`, 400, `"step" is a whole number, not the string "ten"`},
		{"unknown field", good, `{"step": 1, "los": 2}`, 400, `unknown field "los"`},
		{"too many metrics", good, manyMetrics(progress.MaxMetrics + 1), 400, "more than 16 metrics"},
	} {
		code, reply := e.post("mine", c.token, c.body)
		if code != c.code || !strings.Contains(reply, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, code, reply, c.code, c.says)
		}
	}
	// Past a burst of five, a pod reports once a second.
	var codes []int
	for range 8 {
		code, _ := e.post("mine", good, `{"step": 2}`)
		codes = append(codes, code)
	}
	if codes[0] != 204 || codes[len(codes)-1] != 429 {
		t.Errorf("eight reports at once answered %v: the first accepted, the last refused as too fast", codes)
	}
	job := jobtest.WaitJob[v1beta1.TfJob](t, ns, "theirs", "read", func(*v1beta1.TfJob) error { return nil })
	if job.Status.Progress != nil {
		t.Errorf("tfjob/theirs has progress %+v from reports refused to it or sent for another", job.Status.Progress)
	}
}

func manyMetrics(n int) string {
	var b bytes.Buffer
	b.WriteString(`{"step": 1, "metrics": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"m%d": %d`, i, i)
	}
	b.WriteString("}}")
	return b.String()
}

// However many reports come, a job's status is written for them at most once per WriteEvery.
func TestReportsAreCoalesced(t *testing.T) {
	ns := jobtest.Namespace(t)
	e := startEndpoint(t, ns)
	master, worker := createJob(t, ns, "busy")
	e.trust()
	tokens := []string{token(t, ns, master, progress.Audience), token(t, ns, worker, progress.Audience)}

	wc, err := client.NewWithWatch(jobtest.Config, client.Options{Scheme: operator.Scheme()})
	jobtest.Must(t, err)
	w, err := wc.Watch(context.Background(), &v1beta1.TfJobList{}, client.InNamespace(ns))
	jobtest.Must(t, err)
	defer w.Stop()

	// 100 reports in about a second, from both replicas; the limiter refuses most. Meanwhile
	// the worker's pod changes, and each change reconciles the job: those passes too must
	// leave the reports for the next write.
	accepted, last := 0, 0
	kl := jobtest.Kubelet{T: t, NS: ns}
	for i := range 100 {
		if i%10 == 5 {
			kl.Update("busy-worker-0", func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: "example.com/probe", Status: corev1.ConditionStatus([]string{"True", "False"}[i/10%2])}}
			})
		}
		code, reply := e.post("busy", tokens[i%2], fmt.Sprintf(`{"step": %d}`, i+1))
		switch code {
		case 204:
			accepted, last = accepted+1, i+1
		case 429:
		default:
			t.Fatalf("report %d: %d %s", i, code, reply)
		}
		time.Sleep(10 * time.Millisecond)
	}
	writes, steps := 0, []int64{}
	deadline := time.After(progress.WriteEvery - 2*time.Second)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if j, ok := ev.Object.(*v1beta1.TfJob); ok && ev.Type == watch.Modified && j.Status.Progress != nil &&
				(len(steps) == 0 || steps[len(steps)-1] != j.Status.Progress.Step) {
				writes++
				steps = append(steps, j.Status.Progress.Step)
			}
		case <-deadline:
			done = true
		}
	}
	if accepted < 5 || writes != 1 {
		t.Errorf("%d reports accepted gave %d status writes of progress (steps %v), want 1 within %v", accepted, writes, steps, progress.WriteEvery)
	}
	// The last report is written at the end of the WriteEvery.
	jobtest.WaitJob[v1beta1.TfJob](t, ns, "busy", "the last accepted step", func(j *v1beta1.TfJob) error {
		if j.Status.Progress == nil || j.Status.Progress.Step != int64(last) {
			return fmt.Errorf("progress %+v, want step %d", j.Status.Progress, last)
		}
		return nil
	})
}
