package up

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/cache"
	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/images/ours"
	"github.com/mlkube/mlkube/devctl/internal/manifests"
	"github.com/mlkube/mlkube/devctl/internal/steps"
	nodeprobeconfig "github.com/mlkube/mlkube/nodeprobe/config"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// install is what up installs into the cluster called name: the manifests of the operator and
// of nodeprobe, naming the images built and the version they embed. The early apply has one of
// its own, of the early builds (early.go).
type install struct {
	name    string
	version string
	built   []*ours.Built
	// kueue runs the operator with its Kueue integration (--kueue).
	kueue bool
}

// image is the reference devctl built for the image called name, or fallback.
func (in install) image(name, fallback string) string {
	for _, b := range in.built {
		if b.Name == name {
			return b.Ref.String()
		}
	}
	return fallback
}

func (in install) operatorImage() string {
	return in.image("mlkube/operator", cluster.OperatorDevImage)
}

func (in install) nodeprobeImage() string {
	return in.image("mlkube/nodeprobe", cluster.NodeprobeDevImage)
}

// applyOperator applies the operator's manifests through kube. Objects as devctl's last apply
// left them are not applied again: the CRDs' no-op applies are most of this step's time.
func (in *install) applyOperator(ctx context.Context, kube *cluster.Clients) (string, error) {
	objs, err := manifests.Read(config.FS, config.Default)
	if err != nil {
		return "", fmt.Errorf("reading the operator manifests: %w", err)
	}
	if err := manifests.SetImage(objs, cluster.OperatorDevImage, in.operatorImage()); err != nil {
		return "", err
	}
	d := manifests.Find(objs, "Deployment", cluster.OperatorNamespace, cluster.OperatorDeployment)
	if d == nil {
		return "", fmt.Errorf("the operator manifests have no Deployment %s/%s", cluster.OperatorNamespace, cluster.OperatorDeployment)
	}
	setVersion(d, in.version)
	if in.kueue {
		if err := addArg(d, cluster.OperatorContainer, "--kueue"); err != nil {
			return "", err
		}
	}
	objs, kept, err := withoutLiveAcceleratorConfig(ctx, kube, objs)
	if err != nil {
		return "", err
	}
	var mem *manifests.Memory
	if dir, err := cache.Dir(); err == nil {
		mem = manifests.OpenMemory(filepath.Join(dir, "applied", in.name+".json"))
	}
	applied, err := manifests.ApplyRemembering(ctx, kube, objs, mem)
	if serr := mem.Save(); err == nil && serr != nil {
		steps.From(ctx).Printf("not remembering what was applied: %v", serr)
	}
	if err != nil {
		return "", err
	}
	if kept {
		return fmt.Sprintf("Applied the operator manifests: %s; kept the accelerator config (nodeprobe's)", applied), nil
	}
	return fmt.Sprintf("Applied the operator manifests: %s", applied), nil
}

func (in *install) applyNodeprobe(ctx context.Context, kube *cluster.Clients) (string, error) {
	objs, err := nodeprobeObjects(in.nodeprobeImage(), in.version)
	if err != nil {
		return "", err
	}
	applied, err := manifests.Apply(ctx, kube, objs)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Applied the nodeprobe manifests: %s", applied), nil
}

// setVersion records the version devctl built on o, for devctl status and version.
func setVersion(o *unstructured.Unstructured, version string) {
	annotations := o.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[cluster.VersionAnnotation] = version
	o.SetAnnotations(annotations)
}

// addArg adds arg to the arguments of the container called container in Deployment d, unless
// they hold it already.
func addArg(d *unstructured.Unstructured, container, arg string) error {
	fields := []string{"spec", "template", "spec", "containers"}
	containers, _, err := unstructured.NestedSlice(d.Object, fields...)
	if err != nil {
		return fmt.Errorf("Deployment %s: %w", d.GetName(), err)
	}
	for _, c := range containers {
		c, ok := c.(map[string]any)
		if !ok || c["name"] != container {
			continue
		}
		args, _, err := unstructured.NestedStringSlice(c, "args")
		if err != nil {
			return fmt.Errorf("Deployment %s, container %s: %w", d.GetName(), container, err)
		}
		if !slices.Contains(args, arg) {
			args = append(args, arg)
		}
		if err := unstructured.SetNestedStringSlice(c, args, "args"); err != nil {
			return err
		}
		return unstructured.SetNestedSlice(d.Object, containers, fields...)
	}
	return fmt.Errorf("Deployment %s has no container %s", d.GetName(), container)
}

// nodeprobeObjects are nodeprobe's manifests (namespace, RBAC, DaemonSet) as devctl applies
// them: with the image it built, and its version on the DaemonSet.
func nodeprobeObjects(image, version string) ([]*unstructured.Unstructured, error) {
	objs, err := manifests.Read(nodeprobeconfig.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("reading the nodeprobe manifests: %w", err)
	}
	if err := manifests.SetImage(objs, cluster.NodeprobeDevImage, image); err != nil {
		return nil, fmt.Errorf("nodeprobe manifests: %w", err)
	}
	ds := manifests.Find(objs, "DaemonSet", cluster.NodeprobeNamespace, cluster.NodeprobeDaemonSet)
	if ds == nil {
		return nil, fmt.Errorf("the nodeprobe manifests have no DaemonSet %s/%s", cluster.NodeprobeNamespace, cluster.NodeprobeDaemonSet)
	}
	setVersion(ds, version)
	return objs, nil
}

// withoutLiveAcceleratorConfig drops the accelerator ConfigMap from the operator's objects when
// it exists already. The manifests ship it empty, for a first install; after that it is
// nodeprobe's (and whoever edits it by hand): applying it again would take its data back and
// empty the published config until nodeprobe's next probe.
func withoutLiveAcceleratorConfig(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, bool, error) {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: cluster.OperatorNamespace, Name: cluster.AcceleratorConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return objs, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading ConfigMap %s/%s: %w", cluster.OperatorNamespace, cluster.AcceleratorConfigMap, err)
	}
	kept := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetNamespace() == cluster.OperatorNamespace && o.GetName() == cluster.AcceleratorConfigMap {
			continue
		}
		kept = append(kept, o)
	}
	return kept, len(kept) < len(objs), nil
}

// applyOperatorManifests applies the operator's manifests of in through kube, with --kueue
// among the operator's arguments where keepKueue says so. early is what the early apply of a new
// cluster did of them, reported in place of applying again; zero when there was none.
func (u *up) applyOperatorManifests(ctx context.Context, kube *cluster.Clients, in install, early applied) (string, error) {
	if line, ok := earlyResult(steps.From(ctx), early); ok {
		return line, nil
	}
	on, err := u.keepKueue(ctx, kube)
	if err != nil {
		return "", err
	}
	in.kueue = on
	return in.applyOperator(ctx, kube)
}

// applyNodeprobeManifests applies nodeprobe's manifests of in through kube, or reports the early
// apply's, as applyOperatorManifests does.
func applyNodeprobeManifests(ctx context.Context, kube *cluster.Clients, in install, early applied) (string, error) {
	if line, ok := earlyResult(steps.From(ctx), early); ok {
		return line, nil
	}
	return in.applyNodeprobe(ctx, kube)
}

// waitOperator waits for every kind's CRD to be served and the operator Deployment to run image
// on every replica; both already true means nothing changed, and there is no wait, or that the
// early apply started it (startedEarly).
func (u *up) waitOperator(ctx context.Context, kube *cluster.Clients, image string, startedEarly bool) (string, error) {
	key := client.ObjectKey{Namespace: cluster.OperatorNamespace, Name: cluster.OperatorDeployment}
	var checks []manifests.Check
	for _, k := range v1beta1.Kinds {
		checks = append(checks, manifests.CRDEstablished(kube, k.CRD()))
	}
	ready := manifests.All(append(checks, manifests.DeploymentRolledOut(kube, key))...)
	if ok, _, err := ready(ctx); err == nil && ok {
		if startedEarly {
			return fmt.Sprintf("Operator running %s, started while the cluster was created", image), nil
		}
		return fmt.Sprintf("Operator already running %s", image), nil
	}
	err := u.wait(ctx, ready)
	if err == nil {
		return fmt.Sprintf("Operator running %s", image), nil
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return "", err
	}
	return "", u.notReady(ctx, "the operator", cluster.OperatorNamespace, err, func(ctx context.Context, kubectl string) string {
		return manifests.Diagnose(ctx, kube.Kube, key, kubectl)
	})
}

// waitNodeprobe waits for the DaemonSet to run image, ready, on every node; as waitOperator.
func (u *up) waitNodeprobe(ctx context.Context, kube *cluster.Clients, image string, startedEarly bool) (string, error) {
	key := client.ObjectKey{Namespace: cluster.NodeprobeNamespace, Name: cluster.NodeprobeDaemonSet}
	ready := manifests.DaemonSetRolledOut(kube, key)
	if ok, _, err := ready(ctx); err == nil && ok {
		if startedEarly {
			return fmt.Sprintf("nodeprobe running %s on %s, started while the cluster was created", image, nodeprobeNodes(ctx, kube)), nil
		}
		return fmt.Sprintf("nodeprobe already running %s on %s", image, nodeprobeNodes(ctx, kube)), nil
	}
	err := u.wait(ctx, ready)
	if err == nil {
		return fmt.Sprintf("nodeprobe running %s on %s", image, nodeprobeNodes(ctx, kube)), nil
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return "", err
	}
	return "", u.notReady(ctx, "nodeprobe", cluster.NodeprobeNamespace, err, func(ctx context.Context, kubectl string) string {
		return manifests.DiagnoseDaemonSet(ctx, kube.Kube, key, kubectl)
	})
}

// wait waits until ready, for --wait at most.
func (u *up) wait(ctx context.Context, ready manifests.Check) error {
	wctx, cancel := context.WithTimeout(ctx, u.opts.Wait)
	defer cancel()
	return manifests.Wait(wctx, time.Second, ready)
}

// notReady is the error of a wait for what that ran out: err, and what diagnose finds in
// namespace, with the kubectl command to look further.
func (u *up) notReady(ctx context.Context, what, namespace string, err error, diagnose func(ctx context.Context, kubectl string) string) error {
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	kubectl := fmt.Sprintf("kubectl --context %s -n %s", u.cluster.Context(), namespace)
	diagnosis := diagnose(dctx, kubectl)
	return fmt.Errorf("%s is not ready after %s: %w\n%s", what, u.opts.Wait, err, strings.TrimRight(diagnosis, "\n"))
}

func nodeprobeNodes(ctx context.Context, kube *cluster.Clients) string {
	ds := &appsv1.DaemonSet{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: cluster.NodeprobeNamespace, Name: cluster.NodeprobeDaemonSet}, ds); err != nil {
		return "every node"
	}
	return fmt.Sprintf("%d node(s)", ds.Status.NumberReady)
}
