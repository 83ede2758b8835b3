package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/images/load"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/images/scripted"
	"github.com/mlkube/mlkube/devctl/internal/kindcluster"
	"github.com/mlkube/mlkube/devctl/internal/kueue"
	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// up --kueue: Kueue's manager built from Go modules (package kueue), its image loaded into the
// nodes, Kueue installed from its own chart, waited for, and the default queues made, before
// the operator is applied: the operator's Kueue integration (--kueue) needs Kueue's Workload
// CRD when it starts, and every pod created in the cluster from then on passes Kueue's webhook.

// startKueue starts building Kueue's manager for arch: on a cold machine its build takes
// minutes, which then overlap the cluster's creation and our images' builds.
func (u *up) startKueue(ctx context.Context, arch string) *steps.Background[*scripted.Scripted] {
	return steps.Go(func(progress func(string)) (*scripted.Scripted, error) {
		return scripted.Kueue(ctx, u.root, arch, progress)
	})
}

// loadKueue waits for Kueue's manager, building since startKueue, and loads its image for arch
// into the nodes our pods run on that lack it.
func (u *up) loadKueue(ctx context.Context, building *steps.Background[*scripted.Scripted], arch string) (*scripted.Scripted, string, error) {
	p := steps.From(ctx)
	task := p.Start("building Kueue's manager (hack/build-kubernetes.sh kueue)")
	b, err := building.Wait(task)
	if err != nil {
		return nil, "", err
	}
	if b.Built {
		task.Done("built Kueue %s's manager, cached in %s", b.Version, filepath.Dir(b.Binary))
	} else {
		task.Done("Kueue %s's manager was built before (%s)", b.Version, b.Binary)
	}
	all, err := u.cluster.Nodes()
	if err != nil {
		return nil, "", err
	}
	targets := kindcluster.PodNodes(all)
	var lacking []nodes.Node
	for _, n := range targets {
		have, err := kindcluster.NodeImages(n)
		if err != nil {
			return nil, "", err
		}
		if _, ok := ours.Lookup(have, b.Ref); !ok {
			lacking = append(lacking, n)
		}
	}
	if len(lacking) == 0 {
		return b, fmt.Sprintf("Kueue's image %s already on the nodes", b.Ref), nil
	}
	if err := load.Archive(ctx, []string{b.Ref}, func(w io.Writer) error {
		return b.WriteArchive(w, arch)
	}, lacking); err != nil {
		return nil, "", err
	}
	return b, fmt.Sprintf("Loaded Kueue's image %s into %d node(s)", b.Ref, len(lacking)), nil
}

// installKueue renders Kueue's chart of the version built (b) and applies it through kube: its
// namespace and CRDs, once these are established everything else.
func (u *up) installKueue(ctx context.Context, kube *cluster.Clients, b *scripted.Scripted) (string, error) {
	p := steps.From(ctx)
	moduleDir, err := kueue.ModuleDir(ctx, u.root, b.Version)
	if err != nil {
		return "", err
	}
	ch, err := kueue.LoadChart(kueue.ChartDir(moduleDir))
	if err != nil {
		return "", err
	}
	if ch.AppVersion() != b.Version {
		return "", fmt.Errorf("Kueue's chart in %s installs Kueue %s, not %s", kueue.ChartDir(moduleDir), ch.AppVersion(), b.Version)
	}
	server, err := kube.Kube.Discovery().ServerVersion()
	if err != nil {
		return "", fmt.Errorf("asking the apiserver its version: %w", err)
	}
	objs, err := ch.Objects(kueue.Settings{Image: b.Ref, PodsReadyTimeout: u.opts.KueuePodsReadyTimeout, Kinds: v1beta1.Kinds}, server.GitVersion)
	if err != nil {
		return "", err
	}
	if err := kueue.MarkVersion(objs, b.Version); err != nil {
		return "", err
	}
	crds, rest := kueue.SplitCRDs(objs)
	var mem *manifests.Memory
	if dir, err := cache.ClusterDir(u.opts.Name); err == nil {
		mem = manifests.OpenMemory(filepath.Join(dir, "applied-kueue.json"))
	}
	defer func() {
		if err := mem.Save(); err != nil {
			p.Printf("not remembering what was applied: %v", err)
		}
	}()
	var total manifests.Applied
	add := func(a manifests.Applied) {
		total.Created += a.Created
		total.Changed += a.Changed
		total.Unchanged += a.Unchanged
	}
	a, err := manifests.ApplyRemembering(ctx, kube, append([]*unstructured.Unstructured{kueue.NamespaceObject()}, crds...), mem)
	add(a)
	if err != nil {
		return "", err
	}
	var established []manifests.Check
	for _, crd := range crds {
		established = append(established, manifests.CRDEstablished(kube, crd.GetName()))
	}
	if ok, _, err := manifests.All(established...)(ctx); err != nil || !ok {
		task := p.Start(fmt.Sprintf("waiting for Kueue's %d CRDs to be established", len(crds)))
		if err := u.wait(ctx, manifests.All(established...)); err != nil {
			task.Fail()
			return "", fmt.Errorf("Kueue's CRDs: %w", err)
		}
		task.Done("")
	}
	a, err = manifests.ApplyRemembering(ctx, kube, rest, mem)
	add(a)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Applied Kueue %s from its chart (%s, %d CRDs): %s", b.Version, shortChartDir(moduleDir), len(crds), total), nil
}

// shortChartDir names the chart as sigs.k8s.io/kueue@v0.17.0/charts/kueue, without the module
// cache's own path.
func shortChartDir(moduleDir string) string {
	dir := kueue.ChartDir(moduleDir)
	if i := strings.Index(dir, kueue.Module+"@"); i >= 0 {
		return dir[i:]
	}
	return dir
}

// waitKueue waits for Kueue's manager to roll out with image and its webhooks to answer.
func (u *up) waitKueue(ctx context.Context, kube *cluster.Clients, image string) (string, error) {
	ready := manifests.All(manifests.DeploymentRolledOut(kube, kueue.DeploymentKey), kueue.WebhookAnswers(kube))
	if ok, _, err := ready(ctx); err == nil && ok {
		return fmt.Sprintf("Kueue already running %s; its webhooks answer", image), nil
	}
	err := u.wait(ctx, ready)
	if err == nil {
		return fmt.Sprintf("Kueue running %s; its webhooks answer", image), nil
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return "", err
	}
	return "", u.notReady(ctx, "Kueue", kueue.Namespace, err, func(ctx context.Context, kubectl string) string {
		return manifests.Diagnose(ctx, kube.Kube, kueue.DeploymentKey, kubectl)
	})
}

// applyQueues makes the default queues (kueue.Queues) through kube, the ClusterQueue's quota
// what the nodes can still run; a later up sizes it again.
func applyQueues(ctx context.Context, kube *cluster.Clients) (string, error) {
	p := steps.From(ctx)
	var list corev1.NodeList
	if err := kube.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing the nodes: %w", err)
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods); err != nil {
		return "", fmt.Errorf("listing the pods: %w", err)
	}
	quota, taken := kueue.Quota(list.Items, pods.Items)
	results, err := kueue.ApplyQueues(ctx, kube, kueue.Queues(quota))
	if err != nil {
		return "", err
	}
	var said []string
	for _, r := range results {
		said = append(said, r.String())
		if r.Conflict != "" {
			p.Printf("%s was changed by hand (%s): kept; delete it and run devctl up --kueue again for devctl's", kueue.Describe(r.Object), r.Conflict)
		}
	}
	return fmt.Sprintf("%s; quota %s: what the nodes can run beside the %d pods outside Kueue. Queue a job with the label %s: %s",
		strings.Join(said, ", "), kueue.DescribeQuota(quota), taken, kueue.QueueLabel, kueue.LocalQueue), nil
}

// keepKueue says whether the operator runs its Kueue integration (--kueue): when --kueue is
// given, or Kueue is in the cluster as devctl up --kueue installed it, so that an up without
// --kueue (a change to the operator) keeps the integration the cluster's queues need.
func (u *up) keepKueue(ctx context.Context, kube *cluster.Clients) (bool, error) {
	if u.opts.Kueue {
		return true, nil
	}
	version, err := kueue.Installed(ctx, kube)
	if err != nil || version == "" {
		return false, err
	}
	steps.From(ctx).Printf("Kueue %s is installed (devctl up --kueue): the operator keeps its Kueue integration (--kueue)", version)
	return true, nil
}
