package up

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/images/scripted"
	"github.com/mlkube/mlkube/devctl/internal/registry"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// startRegistryImage starts readying the registry's image for arch: on a cold machine its build
// takes a minute or two, which then overlaps the cluster's creation.
func (u *up) startRegistryImage(ctx context.Context, arch string) *steps.Background[string] {
	return steps.Go(func(progress func(string)) (string, error) {
		return scripted.Registry(ctx, u.root, arch, progress)
	})
}

// runRegistry runs the local registry (package registry) from the image readying since
// startRegistryImage, makes the cluster's nodes pull localhost:5001 from it, and announces it
// through kube.
func (u *up) runRegistry(ctx context.Context, readying *steps.Background[string], kube *cluster.Clients) (string, error) {
	p := steps.From(ctx)
	task := p.Start("readying the registry's image")
	ref, err := readying.Wait(task)
	if err != nil {
		return "", err
	}
	task.Done("%s", ref)
	state, err := registry.Ensure(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("%w\n(devctl up --registry=false makes the cluster without a local registry)", err)
	}
	if err := registry.Connect(ctx); err != nil {
		return "", err
	}
	all, err := u.cluster.Nodes()
	if err != nil {
		return "", err
	}
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Go(func() { errs[i] = registry.Configure(n) })
	}
	wg.Wait()
	stale := false
	for i, err := range errs {
		if errors.Is(err, registry.ErrNoConfigPath) {
			stale, errs[i] = true, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if err := announceRegistry(ctx, kube); err != nil {
		return "", err
	}
	held := ""
	if repos, err := registry.Catalog(ctx); err == nil {
		held = ", holding " + registry.CountRepositories(len(repos))
	}
	if stale {
		return fmt.Sprintf("Registry %s %s%s; but cluster %s was made before devctl ran a registry and its nodes cannot pull from it: make it again to use it (devctl down --name %[4]s, then devctl up --name %[4]s)", registry.Host, state, held, u.opts.Name), nil
	}
	return fmt.Sprintf("Registry %s %s%s; every node pulls from it", registry.Host, state, held), nil
}

// announceRegistry writes KEP-1755's ConfigMap into the cluster.
func announceRegistry(ctx context.Context, kube *cluster.Clients) error {
	want := registry.HostingConfigMap()
	err := kube.Create(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		have := want.DeepCopy()
		if err = kube.Get(ctx, client.ObjectKeyFromObject(want), have); err == nil && !maps.Equal(have.Data, want.Data) {
			have.Data = want.Data
			err = kube.Update(ctx, have)
		}
	}
	if err != nil {
		return fmt.Errorf("writing the ConfigMap kube-public/%s that announces the registry: %w", want.Name, err)
	}
	return nil
}
