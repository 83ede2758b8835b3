package commands

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/checkout"
	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/steps"
)

// Version prints devctl's own version (its build's source revision) and the operator's in the
// cluster of the current context: the version devctl up gave it and its image. A cluster that
// does not answer, or has no operator, is said, not an error: the client's version is still
// worth printing.
func Version(ctx context.Context, out io.Writer) error {
	fmt.Fprintf(out, "devctl    %s\n", clientVersion(ctx))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := connectCurrent(cctx)
	if err != nil {
		fmt.Fprintf(out, "operator  unknown: %s\n", steps.OneLine(err))
		return nil
	}
	var d appsv1.Deployment
	if err := cl.Client.Get(cctx, client.ObjectKey{Namespace: cluster.OperatorNamespace, Name: cluster.OperatorDeployment}, &d); err != nil {
		fmt.Fprintf(out, "operator  none found in context %s (deployment %s/%s: %s)\n", cl.Context, cluster.OperatorNamespace, cluster.OperatorDeployment, steps.OneLine(err))
		return nil
	}
	v := d.Annotations[cluster.VersionAnnotation]
	if v == "" {
		v = "unknown (not installed by devctl up)"
	}
	var images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	fmt.Fprintf(out, "operator  %s, image %s, %d/%d replicas available (context %s)\n", v, strings.Join(images, ", "), d.Status.AvailableReplicas, d.Status.Replicas, cl.Context)
	return nil
}

// clientVersion is the source revision devctl was built from, as Go records it (with "-dirty"
// for uncommitted changes). A build without that record (-buildvcs=false, go run) says the
// checkout it runs from instead, as devctl up names the operator's version, saying so.
func clientVersion(ctx context.Context) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 7)] // as git describe --always abbreviates it
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev != "" {
		return rev + dirty + " (" + info.GoVersion + ")"
	}
	if root, err := checkout.Root(); err == nil {
		return "built without a source revision; the checkout it runs from is " + checkout.Version(ctx, root) + " (" + info.GoVersion + ")"
	}
	return "dev (" + info.GoVersion + ")"
}
