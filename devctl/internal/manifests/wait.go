package manifests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Check looks once whether something is ready; when it is not, it says what it waits for.
type Check func(ctx context.Context) (ready bool, waitingFor string, err error)

// Wait runs check every interval until it reports ready, fails, or ctx ends. On timeout the error
// says what the check still waited for.
func Wait(ctx context.Context, interval time.Duration, check Check) error {
	for {
		ready, waitingFor, err := check(ctx)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			if waitingFor == "" {
				waitingFor = "an answer from the cluster"
			}
			return fmt.Errorf("still waiting for %s: %w", waitingFor, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// All is ready when every check is, and reports the first that is not.
func All(checks ...Check) Check {
	return func(ctx context.Context) (bool, string, error) {
		for _, c := range checks {
			if ready, waitingFor, err := c(ctx); err != nil || !ready {
				return false, waitingFor, err
			}
		}
		return true, "", nil
	}
}

// CRDEstablished is ready when the CRD serves its resource.
func CRDEstablished(c client.Client, name string) Check {
	return func(ctx context.Context) (bool, string, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, "CRD " + name, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "CRD " + name + " to be established", nil
	}
}

// DeploymentRolledOut is ready when the Deployment's latest spec runs on every replica and every
// replica is available, the test `kubectl rollout status` makes.
func DeploymentRolledOut(c client.Client, key client.ObjectKey) Check {
	return func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return false, "Deployment " + key.String(), err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		switch {
		case s.ObservedGeneration < d.Generation:
			return false, fmt.Sprintf("Deployment %s to see its new spec", key), nil
		case s.UpdatedReplicas < want:
			return false, fmt.Sprintf("Deployment %s: %d of %d pods updated", key, s.UpdatedReplicas, want), nil
		case s.Replicas > s.UpdatedReplicas:
			return false, fmt.Sprintf("Deployment %s: new pods to become available and %d old to terminate", key, s.Replicas-s.UpdatedReplicas), nil
		case s.AvailableReplicas < s.UpdatedReplicas:
			return false, fmt.Sprintf("Deployment %s: %d of %d pods available", key, s.AvailableReplicas, s.UpdatedReplicas), nil
		}
		return true, "", nil
	}
}

// Diagnose describes why the Deployment's pods are not ready, for a person to act on: each
// unready pod's phase and container states, its recent events, the last lines of its log, and
// the kubectl commands that show more (kubectl is the command prefix to print, with its
// context and namespace flags). With no pods at all it shows the newest ReplicaSet's events,
// where a refused pod (quota, pod security) is reported.
func Diagnose(ctx context.Context, cs kubernetes.Interface, key client.ObjectKey, kubectl string) string {
	var b strings.Builder
	d, err := cs.AppsV1().Deployments(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("cannot read Deployment %s: %v\n", key, err)
	}
	for _, cond := range d.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			fmt.Fprintf(&b, "Deployment %s: %s: %s\n", key, cond.Type, cond.Message)
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		fmt.Fprintf(&b, "cannot read its pod selector: %v\n", err)
		return b.String()
	}
	list := metav1.ListOptions{LabelSelector: selector.String()}
	pods, err := cs.CoreV1().Pods(key.Namespace).List(ctx, list)
	if err != nil {
		fmt.Fprintf(&b, "cannot list its pods: %v\n", err)
		return b.String()
	}
	if len(pods.Items) == 0 {
		writeReplicaSetEvents(ctx, &b, cs, key, list)
		fmt.Fprintf(&b, "Look at: %s describe deployment %s\n", kubectl, key.Name)
		return b.String()
	}
	writePods(ctx, &b, cs, pods.Items, kubectl)
	return b.String()
}

// DaemonSetRolledOut is ready when the DaemonSet's latest spec runs, ready, on every node it
// should run on: the test `kubectl rollout status` makes, with numberReady for numberAvailable.
func DaemonSetRolledOut(c client.Client, key client.ObjectKey) Check {
	return func(ctx context.Context) (bool, string, error) {
		ds := &appsv1.DaemonSet{}
		if err := c.Get(ctx, key, ds); err != nil {
			return false, "DaemonSet " + key.String(), err
		}
		s := ds.Status
		switch {
		case s.ObservedGeneration < ds.Generation:
			return false, fmt.Sprintf("DaemonSet %s to see its new spec", key), nil
		case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
			return false, fmt.Sprintf("DaemonSet %s: %d of %d pods updated", key, s.UpdatedNumberScheduled, s.DesiredNumberScheduled), nil
		case s.NumberReady < s.DesiredNumberScheduled:
			return false, fmt.Sprintf("DaemonSet %s: %d of %d pods ready", key, s.NumberReady, s.DesiredNumberScheduled), nil
		}
		return true, "", nil
	}
}

// DiagnoseDaemonSet is Diagnose for a DaemonSet: its unready pods, or, with none, its events
// (where a pod refused by pod security or quota is reported).
func DiagnoseDaemonSet(ctx context.Context, cs kubernetes.Interface, key client.ObjectKey, kubectl string) string {
	var b strings.Builder
	ds, err := cs.AppsV1().DaemonSets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("cannot read DaemonSet %s: %v\n", key, err)
	}
	fmt.Fprintf(&b, "DaemonSet %s: %d of %d pods ready, %d updated\n", key, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, ds.Status.UpdatedNumberScheduled)
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		fmt.Fprintf(&b, "cannot read its pod selector: %v\n", err)
		return b.String()
	}
	pods, err := cs.CoreV1().Pods(key.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		fmt.Fprintf(&b, "cannot list its pods: %v\n", err)
		return b.String()
	}
	if len(pods.Items) == 0 {
		fmt.Fprintf(&b, "DaemonSet %s has no pods. Its events:\n", key)
		writeEvents(ctx, &b, cs, key.Namespace, "DaemonSet", key.Name)
		fmt.Fprintf(&b, "Look at: %s describe daemonset %s\n", kubectl, key.Name)
		return b.String()
	}
	writePods(ctx, &b, cs, pods.Items, kubectl)
	return b.String()
}

// writePods describes the unready pods among pods (all of them when every one is ready): phase,
// container states, events, the last lines of their logs, and the kubectl commands for more.
func writePods(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, pods []corev1.Pod, kubectl string) {
	unready := pods[:0:0]
	for _, pod := range pods {
		if !podReady(pod) {
			unready = append(unready, pod)
		}
	}
	if len(unready) == 0 {
		unready = pods
	}
	for _, pod := range unready {
		fmt.Fprintf(b, "Pod %s: %s\n", pod.Name, pod.Status.Phase)
		for _, st := range pod.Status.ContainerStatuses {
			fmt.Fprintf(b, "  container %s: %s (restarts: %d)\n", st.Name, containerState(st.State), st.RestartCount)
			if st.LastTerminationState.Terminated != nil {
				fmt.Fprintf(b, "    last run: %s\n", containerState(st.LastTerminationState))
			}
		}
		b.WriteString("  events:\n")
		writeEvents(ctx, b, cs, pod.Namespace, "Pod", pod.Name)
		var logCommands []string
		for _, st := range pod.Status.ContainerStatuses {
			logCommands = append(logCommands, writeLogs(ctx, b, cs, pod, st, kubectl))
		}
		fmt.Fprintf(b, "  look at: %s describe pod %s\n", kubectl, pod.Name)
		for _, c := range logCommands {
			fmt.Fprintf(b, "           %s\n", c)
		}
	}
}

func podReady(pod corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeReplicaSetEvents writes the events of the Deployment's newest ReplicaSet.
func writeReplicaSetEvents(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, key client.ObjectKey, list metav1.ListOptions) {
	sets, err := cs.AppsV1().ReplicaSets(key.Namespace).List(ctx, list)
	if err != nil || len(sets.Items) == 0 {
		fmt.Fprintf(b, "Deployment %s has no pods and no ReplicaSet. Its events:\n", key)
		writeEvents(ctx, b, cs, key.Namespace, "Deployment", key.Name)
		return
	}
	newest := sets.Items[0]
	for _, rs := range sets.Items[1:] {
		if rs.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = rs
		}
	}
	fmt.Fprintf(b, "Deployment %s has no pods. Events of its ReplicaSet %s:\n", key, newest.Name)
	writeEvents(ctx, b, cs, key.Namespace, "ReplicaSet", newest.Name)
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return strings.TrimSpace("waiting: " + s.Waiting.Reason + " " + s.Waiting.Message)
	case s.Terminated != nil:
		return strings.TrimSpace(fmt.Sprintf("terminated: %s, exit code %d %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message))
	case s.Running != nil:
		return "running"
	}
	return "unknown"
}

// writeEvents writes the last events about one object, oldest first.
func writeEvents(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, ns, kind, name string) {
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		fmt.Fprintf(b, "    cannot list events: %v\n", err)
		return
	}
	items := events.Items
	if len(items) == 0 {
		b.WriteString("    (none)\n")
		return
	}
	sort.SliceStable(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
	if len(items) > 10 {
		items = items[len(items)-10:]
	}
	for _, e := range items {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(b, "    %s %s: %s%s\n", e.Type, e.Reason, strings.TrimSpace(e.Message), count)
	}
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// logLines is how much of a container's log the diagnosis shows.
const logLines = 20

// writeLogs writes the last lines of the container's log: of the run that ended when the
// container waits to restart (a crash loop), else of the current run. It returns the kubectl
// command that shows the whole log.
func writeLogs(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, pod corev1.Pod, st corev1.ContainerStatus, kubectl string) string {
	previous := st.State.Running == nil && st.RestartCount > 0
	tail := int64(logLines)
	opts := &corev1.PodLogOptions{Container: st.Name, TailLines: &tail, Previous: previous}
	command := fmt.Sprintf("%s logs %s -c %s", kubectl, pod.Name, st.Name)
	which := "log"
	if previous {
		which = "log of the last run"
		command += " --previous"
	}
	raw, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).DoRaw(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(b, "  container %s %s: none (%s)\n", st.Name, which, firstLine(err.Error()))
	case len(strings.TrimSpace(string(raw))) == 0:
		fmt.Fprintf(b, "  container %s %s: empty\n", st.Name, which)
	default:
		fmt.Fprintf(b, "  container %s %s, last %d lines:\n", st.Name, which, logLines)
		for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
			fmt.Fprintf(b, "    %s\n", shorten(line))
		}
	}
	return command
}

// maxLogLine keeps a structured log line with a stack trace from filling the screen.
const maxLogLine = 300

func shorten(line string) string {
	if len(line) <= maxLogLine {
		return line
	}
	return line[:maxLogLine] + " …"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
