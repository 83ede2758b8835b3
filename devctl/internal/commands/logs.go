package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/follow"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/internal/jobwatch"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// LogsOptions are the settings of `devctl logs`.
type LogsOptions struct {
	Job string
	// Kind is the job's kind ("tfjob", "mxjob"); empty: whichever kind has a job of that name.
	Kind string
	// Namespace is the job's; empty: the context's.
	Namespace string
	// Replica, when set, shows only that replica ("worker-1").
	Replica string
	// Follow keeps reading until the job ends, taking up recreated pods and restarted
	// containers.
	Follow bool
	// Previous shows each replica's previous run: the one before the kubelet restarted its
	// container in place.
	Previous bool
}

// Logs prints the logs of a job's replicas on out, interleaved by the time they were written,
// each line prefixed with its replica; what cannot be shown is said on status.
func Logs(ctx context.Context, o LogsOptions, out, status io.Writer) error {
	if o.Follow && o.Previous {
		return UsageError(errors.New("--previous shows finished runs; it does not go with -f"))
	}
	cl, err := connectCurrent(ctx)
	if err != nil {
		return err
	}
	if o.Namespace == "" {
		o.Namespace = cl.Namespace
	}
	job, err := findJob(ctx, cl, o)
	if err != nil {
		return err
	}
	if follow.Unreadable(job) != "" {
		// Its replicas are those of a spec devctl cannot read.
		return follow.CannotAct(job, "show the logs of")
	}
	ref := follow.Ref(job)
	names := follow.ReplicaNames(job)
	if o.Replica != "" && !slices.Contains(names, o.Replica) {
		return UsageError(fmt.Errorf("%s has no replica %s; it has %s", ref, o.Replica, strings.Join(names, ", ")))
	}
	printer := follow.NewPrinter(job, colorful(out), colorful(status))
	src := newLogSource(cl.Kube)
	if o.Follow {
		_, err := follow.Follow(ctx, follow.Options{
			Config: cl.Config, Scheme: cl.Scheme, Job: job, Logs: src, Out: out, Status: status,
			Replica: o.Replica, Printer: printer,
		})
		if follow.IsInterrupted(err) && ctx.Err() != nil {
			return nil // Ctrl-C is how -f ends on a job still running
		}
		return err
	}

	pods, err := replicaPods(ctx, cl.Client, job, o.Replica)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		what := "pods"
		if o.Replica != "" {
			what = "pod for " + o.Replica
		}
		return fmt.Errorf("%s has no %s (cleanPodPolicy All deletes them when the job ends; Running keeps finished ones)", ref, what)
	}
	m := &follow.Merger{Out: out, Format: func(l follow.Line) string { return printer.LogLine(l.Replica, l.Text) }}
	shown := 0
	for _, p := range pods {
		replica := follow.ReplicaOf(&p)
		if !jobwatch.HasLog(&p) {
			fmt.Fprint(status, printer.StateLine(replica, "no log yet: %s", follow.PodState(&p)))
			continue
		}
		if err := follow.ReadLog(ctx, src, &p, replica, o.Previous, m); err != nil {
			fmt.Fprint(status, printer.StateLine(replica, "no log: %s", steps.OneLine(err)))
			continue
		}
		shown++
	}
	m.Close()
	if shown == 0 && o.Replica != "" {
		return fmt.Errorf("no log of %s to show", o.Replica)
	}
	return nil
}

// findJob finds the job o names: of o.Kind, else of whichever kind has a job of that name. Two
// jobs of that name (a TfJob and an MXJob, say) are a usage error that asks for --kind.
func findJob(ctx context.Context, cl *current, o LogsOptions) (client.Object, error) {
	kinds := v1beta1.Kinds
	if o.Kind != "" {
		kind := v1beta1.KindNamed(o.Kind)
		if kind == nil {
			return nil, UsageError(fmt.Errorf("--kind %s: it is one of %s", o.Kind, strings.Join(v1beta1.Labels(), ", ")))
		}
		if err := cl.serves(kind); err != nil {
			return nil, err
		}
		kinds = []*v1beta1.Kind{kind}
	}
	var found []client.Object
	var refs []string
	served := 0
	for _, kind := range kinds {
		refs = append(refs, kind.Ref(o.Job))
		if o.Kind == "" && cl.serves(kind) != nil {
			continue
		}
		served++
		job := kind.New()
		err := cl.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Job}, job)
		switch {
		case err == nil:
			found = append(found, job)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	switch len(found) {
	case 0:
		if served == 0 {
			return nil, cl.serves(v1beta1.Kinds[0])
		}
		return nil, fmt.Errorf("no %s in namespace %s (context %s)", strings.Join(refs, " or "), o.Namespace, cl.Context)
	case 1:
		return found[0], nil
	}
	var both, flags []string
	for _, job := range found {
		both = append(both, follow.Ref(job))
		flags = append(flags, "--kind "+follow.KindOf(job).Label())
	}
	return nil, UsageError(fmt.Errorf("%s exist in namespace %s: say which with %s",
		strings.Join(both, " and "), o.Namespace, strings.Join(flags, " or ")))
}

// replicaPods lists the job's replica pods (one replica's with replica), in spec order.
func replicaPods(ctx context.Context, c client.Client, job client.Object, replica string) ([]corev1.Pod, error) {
	sel := follow.KindOf(job).ReplicaPods(job.GetName())
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(job.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	order := map[string]int{}
	for i, n := range follow.ReplicaNames(job) {
		order[n] = i
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if owner := metav1.GetControllerOf(&p); owner == nil || owner.UID != job.GetUID() {
			continue
		}
		if r := follow.ReplicaOf(&p); replica == "" || r == replica {
			pods = append(pods, p)
		}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		return order[follow.ReplicaOf(&pods[i])] < order[follow.ReplicaOf(&pods[j])]
	})
	return pods, nil
}

// newLogSource reads logs from the kubelets through the apiserver; tests, whose apiserver has
// no kubelet behind it, put a fake in its place.
var newLogSource = func(kube kubernetes.Interface) jobwatch.LogSource { return jobwatch.KubeLogs{Pods: kube.CoreV1()} }
