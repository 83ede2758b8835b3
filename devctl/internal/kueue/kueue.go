// Package kueue is Kueue in a devctl cluster (devctl up --kueue): Kueue's manager, built from Go
// modules (hack/kueue/go.mod) into an image of ours, installed from Kueue's own Helm chart (the
// chart of the same module version, in the Go module cache), its config listing every kind of the
// kinds table among its externalFrameworks, and the default queues a job is queued in.
//
// Where to look:
//
//   - config.go: the chart's values and Kueue's manager config (pure);
//   - chart.go: loading and rendering the chart;
//   - queues.go: the default ResourceFlavor, ClusterQueue and LocalQueue, the quota from the nodes
//     (pure);
//   - image.go: the binary (hack/build-kubernetes.sh kueue) and its image;
//   - install.go: applying what the chart renders, waiting for Kueue, applying the queues.
package kueue

import (
	"time"

	"github.com/mlkube/mlkube/operator/replicajob"
)

// What devctl installs of Kueue, and where.
const (
	// Namespace is Kueue's, as its own manifests name it.
	Namespace = "kueue-system"
	// Release is the Helm release name the chart is rendered as: the objects are then named as
	// Kueue's own manifests name them (kueue-controller-manager, ...).
	Release = "kueue"
	// Deployment is Kueue's manager.
	Deployment = "kueue-controller-manager"
	// ServiceAccount is its manager's, which ManagerRBAC binds to.
	ServiceAccount = "kueue-controller-manager"
	// ImageName is the image devctl wraps the manager in; its tag is the version and a hash of
	// the content (v0.17.0-0123456789ab).
	ImageName = "mlkube/kueue"
	// ManagerBinary is the manager's file in the image's root: the chart's Deployment runs it
	// (command: [/manager]).
	ManagerBinary = "manager"
	// VersionAnnotation on Kueue's Deployment records the Kueue version devctl installed; up
	// keeps the operator's Kueue integration on where it finds it, and devctl status reads it.
	VersionAnnotation = "mlkube.io/kueue-version"
	// Module is Kueue's Go module, pinned in hack/kueue/go.mod.
	Module = "sigs.k8s.io/kueue"
	// Version is the Kueue version hack/kueue/go.mod pins (a test checks), which the help
	// names; up installs the version the build gives.
	Version = "v0.17.0"
)

// The default queues devctl up --kueue creates.
const (
	Flavor       = "default-flavor"
	ClusterQueue = "mlkube"
	LocalQueue   = "default"
	// LocalQueueNamespace is the namespace of LocalQueue: where jobs go without -n.
	LocalQueueNamespace = "default"
	// QueueLabel is the label that queues a job in a LocalQueue of its namespace.
	QueueLabel = replicajob.QueueLabel
)

// DefaultPodsReadyTimeout is how long an admitted job's pods have to be ready before Kueue
// evicts and requeues it, unless --kueue-pods-ready-timeout says otherwise.
const DefaultPodsReadyTimeout = 5 * time.Minute
