package replicajob_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What the apiserver refuses when the operator creates a job's objects reaches the job
// (operator/replicajob/refusals.go): in its status, within seconds, and in a Warning event.

func TestInvalidPodFailsTheJobWithTheAPIServersMessage(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "inv")
	// The CRD cannot compare quantities; the apiserver's pod validation refuses it.
	job.Spec.ReplicaSpecs[1].Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}
	must(t, k8s.Create(context.Background(), job))

	job = waitJob(t, ns, "inv", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	c := condition(job, v1beta1.JobFailed)
	if c == nil || c.Reason != "PodInvalid" {
		t.Fatalf("Failed condition %+v, want reason PodInvalid", c)
	}
	for _, part := range []string{"inv-worker-", "spec.containers[0].resources.requests", "must be less than or equal to cpu limit", "create the job again"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("Failed message %q lacks %q", c.Message, part)
		}
	}
	waitEvent(t, ns, "inv", "PodInvalid", "spec.containers[0].resources.requests")
	// The other replicas' pods were created in the same round; clean-up removes what runs.
	eventually(t, "no worker pod", func() error {
		for name := range listPods(t, ns) {
			if strings.HasPrefix(name, "inv-worker-") {
				return errorf("pod %s exists", name)
			}
		}
		return nil
	})
}

// A quota used up refuses every pod it covers with Forbidden: a refusal that can pass. The job
// says so, and starts once the quota is gone.
func TestForbiddenCreateIsAConditionThatClears(t *testing.T) {
	ns := namespace(t)
	full := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: full},
	}
	must(t, k8s.Create(context.Background(), quota))
	// There is no quota controller here: the test writes the usage it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: full, Used: full}
	must(t, k8s.Status().Update(context.Background(), quota))
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "quota")))

	job := waitJob(t, ns, "quota", "CreateRefused", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobCreateRefused); c == nil || c.Status != metav1.ConditionTrue {
			return errorf("CreateRefused %+v; %d pods; status %+v", c, len(listPods(t, ns)), j.Status)
		}
		return nil
	})
	c := condition(job, v1beta1.JobCreateRefused)
	if c.Reason != "Forbidden" || !strings.Contains(c.Message, "quota") || !strings.Contains(c.Message, "pod quota-") {
		t.Errorf("CreateRefused %s %q, want Forbidden naming the pod and the quota", c.Reason, c.Message)
	}
	if job.Status.State == v1beta1.JobStateFailed {
		t.Errorf("job failed on a refusal that can pass: %+v", job.Status.Conditions)
	}
	waitEvent(t, ns, "quota", "CreateRefused", "quota", "trying again")
	if n := len(listServices(t, ns)); n != 1 {
		t.Errorf("%d services; the quota covers pods only, so the job's should exist", n)
	}

	must(t, k8s.Delete(context.Background(), quota))
	waitPods(t, ns, podNames("quota")...)
	waitJob(t, ns, "quota", "CreateRefused cleared", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobCreateRefused); c == nil || c.Status != metav1.ConditionFalse {
			return errorf("CreateRefused %+v", c)
		}
		if c := condition(j, v1beta1.JobCreated); c == nil || c.Status != metav1.ConditionTrue {
			return errorf("Created %+v", c)
		}
		return nil
	})
}

// An MXJob and a TfJob of the same name both want <name>-worker-0: the later one fails at once,
// naming the other, and the first runs on untouched.
func TestNameClashFailsTheLaterJob(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "same")))
	first := waitPods(t, ns, podNames("same")...)

	mx := &v1beta1.MXJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "same"},
		Spec: v1beta1.MXJobSpec{ReplicaSpecs: []v1beta1.MXReplicaSpec{
			mxGroup(v1beta1.MXReplicaScheduler, 1), mxGroup(v1beta1.MXReplicaWorker, 1),
		}},
	}
	must(t, k8s.Create(context.Background(), mx))
	eventually(t, "MXJob failed", func() error {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(mx), mx))
		if mx.Status.State != v1beta1.JobStateFailed {
			return errorf("state %q, conditions %+v", mx.Status.State, mx.Status.Conditions)
		}
		return nil
	})
	var c *metav1.Condition
	for i := range mx.Status.Conditions {
		if mx.Status.Conditions[i].Type == v1beta1.JobFailed {
			c = &mx.Status.Conditions[i]
		}
	}
	// Pods and the service are created side by side: whichever clash the operator meets first
	// is named.
	if c == nil || c.Reason != "NameClash" || !strings.Contains(c.Message, "belongs to TfJob same") ||
		!strings.Contains(c.Message, "same-worker-0") && !strings.Contains(c.Message, "service same already exists") {
		t.Fatalf("Failed condition %+v, want NameClash naming TfJob same and same-worker-0 or its service", c)
	}
	waitEvent(t, ns, "same", "NameClash", "TfJob same")

	// The TfJob's pods are the same pods as before, and it has no word of the clash.
	for name, p := range listPods(t, ns) {
		if old, ok := first[name]; ok && old.UID != p.UID {
			t.Errorf("pod %s was replaced", name)
		}
	}
	if j := getJob(t, ns, "same"); j.Status.State == v1beta1.JobStateFailed || condition(j, v1beta1.JobCreateRefused) != nil {
		t.Errorf("the TfJob was touched by the clash: %+v", j.Status.Conditions)
	}
}

func TestPodMadeByHandIsANameClash(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hand-ps-1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
	}))
	must(t, k8s.Create(context.Background(), standardJob(ns, "hand")))
	job := waitJob(t, ns, "hand", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))
	if c := condition(job, v1beta1.JobFailed); c.Reason != "NameClash" || !strings.Contains(c.Message, "pod hand-ps-1 already exists and no job owns it") {
		t.Errorf("Failed %s %q", c.Reason, c.Message)
	}
}

// A job deleted and created again under the same name finds the old job's pods still there
// until the garbage collector removes them (there is none here: the test plays it). That is no
// clash: the new job waits, says why, and starts once they are gone.
func TestJobCreatedAgainWaitsForTheOldOnesPods(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	must(t, k8s.Create(context.Background(), standardJob(ns, "again")))
	waitPods(t, ns, podNames("again")...)
	must(t, k8s.Delete(context.Background(), getJob(t, ns, "again")))
	must(t, k8s.Create(context.Background(), standardJob(ns, "again")))

	job := waitJob(t, ns, "again", "waiting on the old pods", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobCreateRefused); c == nil || c.Reason != "OwnerDeleted" {
			return errorf("CreateRefused %+v", c)
		}
		return nil
	})
	if job.Status.State == v1beta1.JobStateFailed {
		t.Fatalf("the job failed: %+v", job.Status.Conditions)
	}
	for _, p := range listPods(t, ns) {
		must(t, k8s.Delete(context.Background(), &p))
	}
	for _, s := range listServices(t, ns) {
		must(t, k8s.Delete(context.Background(), &s))
	}
	eventually(t, "new pods owned by the new job", func() error {
		pods := listPods(t, ns)
		if len(pods) != 5 {
			return errorf("%d pods", len(pods))
		}
		for name, p := range pods {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != job.UID {
				return errorf("pod %s owned by %+v", name, ref)
			}
		}
		return nil
	})
	waitJob(t, ns, "again", "CreateRefused cleared", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobCreateRefused); c == nil || c.Status != metav1.ConditionFalse {
			return errorf("CreateRefused %+v", c)
		}
		return nil
	})
}

// A TensorBoard Deployment the apiserver refuses does not fail the training, but the job says
// why it has no TensorBoard.
func TestRefusedTensorboardIsACondition(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "tbbad")
	job.Spec.Tensorboard = &v1beta1.TensorboardSpec{LogDir: "/logs", PodLabels: map[string]string{"team": "not a label value"}}
	must(t, k8s.Create(context.Background(), job))
	job = waitJob(t, ns, "tbbad", "CreateRefused", func(j *v1beta1.TfJob) error {
		if c := condition(j, v1beta1.JobCreateRefused); c == nil || c.Status != metav1.ConditionTrue {
			return errorf("CreateRefused %+v", c)
		}
		return nil
	})
	c := condition(job, v1beta1.JobCreateRefused)
	for _, part := range []string{"deployment tbbad-tensorboard", "spec.template.labels", "fix spec.tensorboard"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("CreateRefused message %q lacks %q", c.Message, part)
		}
	}
	if c.Reason != "DeploymentInvalid" || job.Status.State == v1beta1.JobStateFailed {
		t.Errorf("reason %s, state %s: want DeploymentInvalid and a job still running", c.Reason, job.Status.State)
	}
	waitPods(t, ns, podNames("tbbad")...)
	waitEvent(t, ns, "tbbad", "CreateRefused", "tbbad-tensorboard")
}

// Labels and annotations written on a replica template, or for the TensorBoard pod, reach the
// pods: the CRD keeps template.metadata instead of pruning it.
func TestTemplateLabelsAndAnnotationsReachThePods(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns)
	job := standardJob(ns, "meta")
	for i := range job.Spec.ReplicaSpecs {
		job.Spec.ReplicaSpecs[i].Template.Labels = map[string]string{"sidecar.istio.io/inject": "true", "team": "ml"}
		job.Spec.ReplicaSpecs[i].Template.Annotations = map[string]string{"prometheus.io/scrape": "true"}
	}
	job.Spec.Tensorboard = &v1beta1.TensorboardSpec{LogDir: "/logs",
		PodLabels: map[string]string{"team": "ml", "mlkube.io/job-name": "not-mine"}, PodAnnotations: map[string]string{"prometheus.io/scrape": "false"}}
	must(t, k8s.Create(context.Background(), job))

	for name, p := range waitPods(t, ns, podNames("meta")...) {
		if p.Labels["team"] != "ml" || p.Labels["sidecar.istio.io/inject"] != "true" || p.Annotations["prometheus.io/scrape"] != "true" {
			t.Errorf("pod %s labels %v annotations %v", name, p.Labels, p.Annotations)
		}
		if p.Labels["mlkube.io/replica-type"] == "" {
			t.Errorf("pod %s lost the operator's labels: %v", name, p.Labels)
		}
	}
	var dep appsv1.Deployment
	eventually(t, "tensorboard deployment", func() error {
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "meta-tensorboard"}, &dep)
	})
	tmpl := dep.Spec.Template.ObjectMeta
	if tmpl.Labels["team"] != "ml" || tmpl.Annotations["prometheus.io/scrape"] != "false" {
		t.Errorf("tensorboard pod labels %v annotations %v", tmpl.Labels, tmpl.Annotations)
	}
	if tmpl.Labels["mlkube.io/job-name"] != "meta" {
		t.Errorf("a user's label overrode the selector's: %v", tmpl.Labels)
	}
}

func mxGroup(typ v1beta1.MXReplicaType, n int32) v1beta1.MXReplicaSpec {
	return v1beta1.MXReplicaSpec{MXReplicaType: typ, Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "mxnet", Image: "mlkube/trainer:test"}},
	}}}
}
