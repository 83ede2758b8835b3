package commands

import (
	"context"
	"fmt"
	"io"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/kueue"
	"github.com/mlkube/mlkube/devctl/internal/registry"
	"github.com/mlkube/mlkube/operator/admission"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Status reports on the cluster through the kubeconfig kind keeps for it, whatever the current
// context (any kind cluster of that name, made by devctl or not): its nodes, the operator,
// nodeprobe and the accelerator config it published, Kueue, the local registry, the CRD of every kind,
// and the jobs of each kind by state. It fails only when it cannot look (no Docker, no cluster, no API server); what it
// finds unhealthy it reports.
func Status(ctx context.Context, name string, out io.Writer) error {
	if _, err := kindcluster.CheckDocker(ctx); err != nil {
		return err
	}
	c := kindcluster.New(name, kindcmd.NewLogger())
	exists, err := c.Exists()
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("no cluster %s: create it with `devctl up`", name)
	}
	if err := c.CheckRunning(ctx); err != nil {
		return err
	}
	kube, err := cluster.Connect(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		return fmt.Errorf("the API server of cluster %s does not answer: %w", name, err)
	}

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Cluster\t%s (context %s)\n", name, c.Context())
	for i, n := range nodes.Items {
		label := ""
		if i == 0 {
			label = "Nodes"
		}
		fmt.Fprintf(w, "%s\t%s  %s  %s\n", label, n.Name, nodeReady(n), n.Status.NodeInfo.KubeletVersion)
	}
	fmt.Fprintf(w, "Operator\t%s\n", operatorHealth(ctx, kube))
	fmt.Fprintf(w, "nodeprobe\t%s\n", nodeprobeHealth(ctx, kube))
	fmt.Fprintf(w, "GPUs\t%s\n", gpuHealth(ctx, kube, nodes.Items))
	fmt.Fprintf(w, "Kueue\t%s\n", kueue.StatusLine(ctx, kube))
	fmt.Fprintf(w, "Registry\t%s\n", registryLine(ctx))
	crdLine, served := crdHealth(ctx, kube)
	fmt.Fprintf(w, "CRDs\t%s\n", crdLine)
	fmt.Fprintf(w, "Admission\t%s\n", admissionLine(ctx, kube))
	writeJobs(ctx, w, kube, served)
	return w.Flush()
}

// writeJobs writes a row per kind that served says is served, with its jobs by state, and
// under it a line for each unreadable job, naming it and the field; then what to do about those,
// once. opts narrow the lists (tests: one namespace).
func writeJobs(ctx context.Context, w io.Writer, kube *cluster.Clients, served map[*v1beta1.Kind]bool, opts ...client.ListOption) {
	unreadable := false
	for _, k := range v1beta1.Kinds {
		if !served[k] {
			continue
		}
		summary, bad := jobsByState(ctx, kube, k, opts...)
		fmt.Fprintf(w, "%ss\t%s\n", k.Name, summary)
		for _, line := range bad {
			fmt.Fprintf(w, "\t  %s\n", line)
		}
		unreadable = unreadable || len(bad) > 0
	}
	if unreadable {
		fmt.Fprintf(w, "Unreadable\t%s\n", v1beta1.UnreadableHint)
	}
}

func nodeReady(n corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return "Ready"
			}
			return strings.TrimSpace("NotReady " + c.Reason)
		}
	}
	return "NotReady"
}

func operatorHealth(ctx context.Context, kube *cluster.Clients) string {
	d := &appsv1.Deployment{}
	err := kube.Get(ctx, client.ObjectKey{Namespace: cluster.OperatorNamespace, Name: cluster.OperatorDeployment}, d)
	if apierrors.IsNotFound(err) {
		return "not installed (run `devctl up`)"
	}
	if err != nil {
		return "cannot tell: " + err.Error()
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	health := "not available"
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			if c.Status == corev1.ConditionTrue {
				health = "Available"
			} else if c.Message != "" {
				health = "not available: " + c.Message
			}
		}
	}
	version := d.Annotations[cluster.VersionAnnotation]
	if version == "" {
		version = "unknown (not installed by devctl)"
	}
	image := ""
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	return fmt.Sprintf("%s, %d/%d ready, version %s, image %s", health, d.Status.ReadyReplicas, want, version, image)
}

// crdHealth says, for every kind of the table, whether its CRD is installed and established, and
// which kinds' jobs can so be listed: "established, serving mlkube.io/v1beta1: tfjobs, mxjobs,
// pytorchjobs", or what is wrong with which.
func crdHealth(ctx context.Context, kube *cluster.Clients) (string, map[*v1beta1.Kind]bool) {
	served := map[*v1beta1.Kind]bool{}
	var ok, problems []string
	versions := map[string]bool{}
	for _, k := range v1beta1.Kinds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := kube.Get(ctx, client.ObjectKey{Name: k.CRD()}, crd)
		switch {
		case apierrors.IsNotFound(err):
			problems = append(problems, k.Plural+" not installed (run `devctl up`)")
			continue
		case err != nil:
			problems = append(problems, k.Plural+": cannot tell: "+err.Error())
			continue
		}
		established := false
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			problems = append(problems, k.Plural+" installed, not established yet")
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				versions[crd.Spec.Group+"/"+v.Name] = true
			}
		}
		served[k] = true
		ok = append(ok, k.Plural)
	}
	line := ""
	if len(ok) > 0 {
		line = "established, serving " + strings.Join(slices.Sorted(maps.Keys(versions)), ", ") + ": " + strings.Join(ok, ", ")
	}
	if len(problems) > 0 {
		line = strings.TrimPrefix(line+"; "+strings.Join(problems, "; "), "; ")
	}
	return line, served
}

// jobsByState counts the jobs of a kind in every namespace by state, and names each unreadable
// one (v1beta1.Job.Unreadable) with why: "tfjob/x in namespace a is unreadable: spec...".
func jobsByState(ctx context.Context, kube *cluster.Clients, kind *v1beta1.Kind, opts ...client.ListOption) (string, []string) {
	list := kind.NewList()
	err := kube.List(ctx, list, opts...)
	switch {
	case apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return kind.Name + " CRD not installed (run `devctl up`)", nil
	case err != nil:
		return "cannot list: " + err.Error(), nil
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return "cannot count: " + err.Error(), nil
	}
	var unreadable []string
	for _, obj := range items {
		if job, ok := obj.(v1beta1.Job); ok && job.Unreadable() != "" {
			unreadable = append(unreadable, fmt.Sprintf("%s in namespace %s is unreadable: %s", kind.Ref(job.GetName()), job.GetNamespace(), job.Unreadable()))
		}
	}
	return countStates(items), unreadable
}

// countStates summarizes jobs of any kind by status.state, in a fixed order: "1 Running, 2
// Succeeded"; "none" when there are none.
func countStates(jobs []runtime.Object) string {
	if len(jobs) == 0 {
		return "none"
	}
	counts := map[string]int{}
	for _, obj := range jobs {
		job, ok := obj.(v1beta1.Job)
		if !ok {
			return fmt.Sprintf("cannot count a %T", obj)
		}
		state := string(job.JobStatus().State)
		switch {
		case job.Unreadable() != "":
			// Whatever its status said last, nothing acts on it now.
			state = "Unreadable"
		case state == "":
			state = "New"
		case job.JobStatus().Phase == v1beta1.JobPhaseSuspended:
			// Running as an outcome, yet without pods: counted apart, as kubectl counts a
			// suspended Job.
			state = "Suspended"
		}
		counts[state]++
	}
	order := map[string]int{"New": 0, string(v1beta1.JobStateRunning): 1, "Suspended": 2, string(v1beta1.JobStateSucceeded): 3, string(v1beta1.JobStateFailed): 4, "Unreadable": 5}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool {
		oi, iok := order[states[i]]
		oj, jok := order[states[j]]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return states[i] < states[j]
	})
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf("%d %s", counts[s], s)
	}
	return strings.Join(parts, ", ")
}

// registryLine is the registry's line of devctl status.
func registryLine(ctx context.Context) string {
	r, err := registry.Look(ctx)
	switch {
	case err != nil:
		return "cannot tell: " + err.Error()
	case !r.Exists:
		return "none (devctl up runs one at " + registry.Host + ")"
	case !r.Running:
		return fmt.Sprintf("%s: container %s stopped (devctl up starts it again; its images are kept)", registry.Host, registry.Container)
	case r.Err != nil:
		return fmt.Sprintf("%s: running, but %v", registry.Host, r.Err)
	case len(r.Repositories) == 0:
		return fmt.Sprintf("%s: running (%s), empty: docker push %s/NAME:TAG", registry.Host, r.Image, registry.Host)
	}
	shown := r.Repositories
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(r.Repositories)-5)
	}
	return fmt.Sprintf("%s: running (%s), %s: %s%s", registry.Host, r.Image, registry.CountRepositories(len(r.Repositories)), strings.Join(shown, ", "), more)
}

// admissionLine says whether the admission policy (operator/admission) is installed and bound:
// without it nothing stops a change to a running job's replica groups, and a template no pod
// could carry is refused only when the operator creates its pods.
func admissionLine(ctx context.Context, kube *cluster.Clients) string {
	without := "nothing stops a change to a running job's groups, and templates no pod could carry fail only at pod creation (run `devctl up`)"
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	switch err := kube.Get(ctx, client.ObjectKey{Name: admission.Name}, &policy); {
	case apierrors.IsNotFound(err):
		return "policy " + admission.Name + " not installed: " + without
	case err != nil:
		return "cannot tell: " + err.Error()
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	switch err := kube.Get(ctx, client.ObjectKey{Name: admission.Name}, &binding); {
	case apierrors.IsNotFound(err):
		return "policy " + admission.Name + " installed but not bound: " + without
	case err != nil:
		return "cannot tell: " + err.Error()
	case !slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny):
		return fmt.Sprintf("policy %s bound with %v, which refuses nothing: %s", admission.Name, binding.Spec.ValidationActions, without)
	}
	line := fmt.Sprintf("policy %s enforced: running jobs keep their groups; template keys, annotations, extended resources and queue names checked", admission.Name)
	if tc := policy.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		line += fmt.Sprintf("; %d type-check warnings (kubectl get validatingadmissionpolicy %s -o yaml)", len(tc.ExpressionWarnings), admission.Name)
	}
	return line
}
