// Command devctl gives a developer a local mlkube: a kind cluster running the operator built
// from the checkout's source (`devctl up`), a look at it (`devctl status`), its removal
// (`devctl down`), jobs of every kind run and followed in it (`devctl run`, `logs`,
// `convert`), images of the local Docker engine loaded into it (`devctl load`), and the terminal
// dashboard on it (`devctl dashboard`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/devctl/internal/cluster"
	"github.com/mlkube/mlkube/devctl/internal/commands"
	"github.com/mlkube/mlkube/devctl/internal/convert"
	"github.com/mlkube/mlkube/devctl/internal/kueue"
	"github.com/mlkube/mlkube/devctl/internal/registry"
	"github.com/mlkube/mlkube/devctl/internal/up"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// kindsAnd and kindsOr name every kind of the API's table, for the help texts; containers lists
// their training containers; kindFlag is the help of --kind, which takes a kind's label.
var (
	kindsAnd, kindsOr = v1beta1.KindNames("and"), v1beta1.KindNames("or")
	containers        = func() string {
		var names []string
		for _, k := range v1beta1.Kinds {
			names = append(names, k.Container)
		}
		return strings.Join(names, ", ")
	}()
	kindFlag = "the job's kind, one of " + strings.Join(v1beta1.Labels(), ", ") + " (default: whichever has a job named JOB)"
)

func main() {
	// controller-runtime's client would otherwise warn that no logger was set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root().ExecuteContext(ctx)
	stop()
	if err != nil && err.Error() != "" {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(commands.ExitCode(err))
}

func root() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devctl",
		Short: "A local mlkube: a kind cluster running the operator built from this checkout",
		Long: `devctl runs mlkube on your machine. ` + "`devctl up`" + ` creates a kind cluster in Docker,
builds the operator's image from the source of this checkout (no Dockerfile, no registry), loads
it into the cluster and installs the operator; ` + "`devctl status`" + ` tells how the cluster, the
operator and your jobs are doing; ` + "`devctl down`" + ` deletes the cluster. Run it from inside the
checkout.

` + "`devctl run`" + ` submits a ` + kindsOr + ` and follows it to its end, every replica's
log included; ` + "`devctl logs`" + ` shows a job's logs again; ` + "`devctl convert`" + ` turns a manifest
written for an older TensorFlow, MXNet, PyTorch or JAX operator into today's job. These three work on the
cluster of the current kubeconfig context, which devctl up sets to its kind cluster; so does
` + "`devctl dashboard`" + `, the live terminal dashboard of the jobs, their replicas and logs (tfjob-tui).
A trainer image you build with docker build is in the local Docker engine, not on the nodes:
` + "`devctl run`" + ` loads the images its job names into the nodes, and ` + "`devctl load`" + ` does it by hand.`,
		Example: `  go run ./devctl/cmd/devctl up
  go run ./devctl/cmd/devctl run samples/tfjob-distributed.yaml
  go run ./devctl/cmd/devctl status
  go run ./devctl/cmd/devctl dashboard
  go run ./devctl/cmd/devctl down`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return commands.UsageError(err) })
	cmd.AddCommand(upCommand(), downCommand(), statusCommand(), runCommand(), loadCommand(), logsCommand(), convertCommand(), dashboardCommand(),
		suspendCommand(true), suspendCommand(false), versionCommand(), buildCommand(), kindConfigCommand())
	return cmd
}

// args checks the number of arguments like cobra.ExactArgs, as a usage error (exit 2).
func args(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return commands.UsageError(fmt.Errorf("%w; see devctl %s --help", err, cmd.Name()))
		}
		return nil
	}
}

func runCommand() *cobra.Command {
	opts := commands.RunOptions{Stdin: os.Stdin}
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Submit a job (" + kindsOr + ") and follow it to its end: replica states and every replica's log",
		Long: `Run submits the job (` + kindsOr + `) in FILE to the cluster of the current kubeconfig context and
follows it until it ends. FILE may be in today's mlkube.io/v1beta1 form or in any older form
devctl convert reads (devctl convert --help lists them); an older one is converted first, and
what the conversion changed is printed as warnings.

Before anything is created, the apiserver checks the job (a server-side dry run): an invalid job
is reported one cause per line, field path first, and nothing is created. A job of the same name
is an error; --replace deletes it with its pods, waits until they are gone, and creates the new
one. The namespace is --namespace, else the manifest's, else the context's.

While the job runs, run prints on stderr each change of a replica ("worker-1  Running -> Failed
(exit code 137, Error)", a recreated pod, an in-place restart) and of the job's phase, state,
restarts and conditions, and on stdout every replica's log, interleaved in the order the lines
were written, each prefixed with its replica ("worker-1 | ..."; in colour on a terminal). A
recreated pod's log is followed from its start; no line is printed twice.

Images you built yourself (docker build -t my-trainer:v1 .) are in the local Docker engine, not
on the kind nodes. When the current context is a kind cluster's (kind-<name>), run loads every
image the job names (each container and init container of every replica, and TensorBoard's) that
the engine holds and the nodes lack, before it creates the job: "• Loading images from Docker into
the nodes ...", by image ID, so an image rebuilt under the same tag is loaded again and one
already there is not. An image the engine does not hold is left to the cluster to pull. Name such
an image with imagePullPolicy: IfNotPresent (Always, the default for :latest, pulls instead; run
warns). devctl load does the same by hand.

Exit codes: 0 the job succeeded; 1 it failed (the Failed condition's message is printed) or
devctl could not do its work; 2 bad usage, a file that cannot be read or converted, or an invalid
job; 124 --timeout passed first; 130 Ctrl-C. Ctrl-C and --timeout stop following, not the job:
devctl logs JOB -f follows it again. --rm deletes the job once it has ended, never when following
stopped before.

A job that waits on something you must fix (an image no one can pull, no node that fits, a
missing secret) has the state Waiting, and the operator says why once for all the replicas it
applies to; run prints that line once. --pending-timeout D gives up on such a job once it has
waited D: exit 1 with the reason, and with --rm the job is deleted.

--watch submits FILE again each time it changes (after 300ms without further changes), and each
time an image the job names gets another image ID in the local Docker engine (you ran docker build
again): the old job and its pods are deleted, the changed image is loaded into the nodes, the new
job is created and followed. A change that does not validate is reported and the running job
kept. --watch ends with Ctrl-C (exit 0).`,
		Example: `  # run the sample distributed trainer and follow it to its end
  devctl run samples/tfjob-distributed.yaml

  # the same trainer as an MXJob: a scheduler, two servers and two workers
  devctl run samples/mxjob-distributed.yaml

  # run it again under the same name, deleting the last run first
  devctl run --replace samples/tfjob-distributed.yaml

  # a 2017 manifest: converted, with warnings, then run; the job is deleted once it has ended
  devctl run --rm samples/legacy/tfjob-2017.yaml

  # an MXJob of the fork for MXNet (fioravanzo.org/v1alpha1), converted and run
  devctl run samples/legacy/mxjob-fioravanzo.yaml

  # edit and re-run: every save submits the job again
  devctl run --watch --replace my-job.yaml

  # your own trainer: built into Docker, loaded into the nodes by run; with --watch, every
  # docker build of it runs the job again
  docker build -t my-trainer:v1 . && devctl run --watch my-trainer.yaml

  # in CI: give up after ten minutes, or after one on an image that cannot be pulled
  devctl run --timeout 10m --pending-timeout 1m --rm samples/tfjob-distributed.yaml`,
		Args: args(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			return commands.Run(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "namespace of the job (default: the manifest's, else the kubeconfig context's)")
	f.BoolVar(&opts.Replace, "replace", false, "delete a job of the same name, with its pods, and wait until it is gone before creating")
	f.BoolVar(&opts.Rm, "rm", false, "delete the job once it has ended (not when following stops first)")
	f.BoolVar(&opts.Watch, "watch", false, "submit FILE again each time it changes, until Ctrl-C")
	f.DurationVar(&opts.Timeout, "timeout", 0, "stop following after this long, exit 124, and leave the job running (default: no limit)")
	f.DurationVar(&opts.PendingTimeout, "pending-timeout", 0, "give up, exit 1 (and delete the job with --rm), once the job has waited this long on something you must fix: an image no one can pull, no node that fits (default: wait)")
	return cmd
}

func loadCommand() *cobra.Command {
	opts := commands.LoadOptions{Name: cluster.DefaultName}
	cmd := &cobra.Command{
		Use:   "load IMAGE...",
		Short: "Load images from the local Docker engine into the cluster's nodes (as kind load docker-image)",
		Long: `Load copies images from the local Docker engine into the kind cluster's nodes, so that pods can
run them without a registry. An image you build (docker build -t my-trainer:v1 .) exists only in
the engine; a pod that names it on a kind node waits in ErrImagePull until it is loaded there.

devctl run does this by itself for every image its job names; load is for pods you create
otherwise (kubectl apply), or to load ahead of time. It loads into the nodes pods run on, as
devctl up does for the operator: the workers when the cluster has them, else its one node. It
compares by image ID (the digest docker images --no-trunc shows), so an image already on every
node under that name is not loaded again, and one rebuilt under the same tag is. The images go
over as one archive (docker save), loaded into the nodes at once, each step shown with its time.

Name the image in the pod as you named it here, with imagePullPolicy: IfNotPresent or Never: a
pod that pulls (imagePullPolicy: Always, the default for :latest and for no tag) asks a registry
and does not use the loaded image. An image the engine lacks is an error (build or pull it
first); so is one of devctl's own (mlkube/trainer, mlkube/operator, ...), which devctl up builds
and loads.`,
		Example: `  # build your trainer and load it into the cluster mlkube
  docker build -t my-trainer:v1 .
  devctl load my-trainer:v1

  # several images, into the cluster made by devctl up --name multi --workers 2
  devctl load --name multi my-trainer:v1 my-evaluator:v1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return commands.UsageError(fmt.Errorf("name at least one image; see devctl %s --help", cmd.Name()))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Images = args
			return commands.Load(cmd.Context(), opts, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", opts.Name, "name of the kind cluster")
	return cmd
}

func logsCommand() *cobra.Command {
	var opts commands.LogsOptions
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Show the logs of a job's replicas, interleaved, each line prefixed with its replica",
		Long: `Logs prints the log of every replica of the job JOB, a ` + kindsOr + ` (of the
container its kind trains in: ` + containers + `), interleaved in the order the lines were written, each line prefixed with its
replica ("worker-1 | ..."), or only one replica's with --replica. JOB is found by its name among
all kinds; when jobs of two kinds have that name, --kind says which. It works on finished pods too: the default cleanPodPolicy,
Running, keeps the pods that finished, so their logs stay readable after the job has ended (All
deletes them).

With -f it keeps following until the job ends (or Ctrl-C), taking up the log of a recreated pod
and of a container restarted in place from its start. --previous shows the run before the
kubelet's last in-place restart of each container (restartPolicy OnFailure or Always); a pod the
operator recreated after a failure is a new pod, whose predecessor's log is gone with it.`,
		Example: `  # every replica of the job, interleaved
  devctl logs distributed

  # one replica, following it until the job ends
  devctl logs distributed --replica worker-1 -f

  # what worker-0 printed before the kubelet restarted it
  devctl logs flaky --replica worker-0 --previous -n team-a

  # the scheduler of an MXJob, when a job of another kind has the same name
  devctl logs mnist --kind mxjob --replica scheduler-0`,
		Args:              args(1),
		ValidArgsFunction: completeJob(&opts.Namespace, &opts.Kind),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Job = args[0]
			return commands.Logs(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "namespace of the job (default: the kubeconfig context's)")
	f.StringVar(&opts.Kind, "kind", "", kindFlag)
	f.StringVar(&opts.Replica, "replica", "", "show only this replica, e.g. worker-1")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep following until the job ends, including recreated pods")
	f.BoolVar(&opts.Previous, "previous", false, "show each container's run before its last in-place restart")
	return cmd
}

func convertCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "convert FILE",
		Short: "Print a " + kindsOr + " manifest of an older API as today's mlkube.io/v1beta1 job",
		Long: `Convert reads the ` + kindsOr + ` manifest in FILE ("-": the standard input) and
prints it as today's mlkube.io/v1beta1 job of that kind, in YAML, on stdout. ` + convert.Reads + `
A current job comes out as it went in. Everything the conversion changed,
dropped or defaulted is printed on stderr, one "warning:" line each, so that the output can go
straight to a file.

devctl run converts the same way before it submits; convert shows what it would submit.
Nothing is sent to a cluster.`,
		Example: `  devctl convert samples/legacy/tfjob-2017.yaml
  devctl convert samples/legacy/mxjob-fioravanzo.yaml
  devctl convert old-job.yaml > job.yaml && kubectl apply -f job.yaml`,
		Args: args(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return commands.Convert(args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	return cmd
}

func upCommand() *cobra.Command {
	opts := up.Options{Name: cluster.DefaultName, Wait: 5 * time.Minute, KueuePodsReadyTimeout: kueue.DefaultPodsReadyTimeout}
	withRegistry := true
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create the cluster (if needed) and install the operator built from source",
		Long: `Up makes sure a kind cluster runs the operator (and nodeprobe, which publishes the GPU driver
config) built from this checkout.

It creates the cluster from --config (default: clusters/kind.yaml of the checkout, else a single
node without kindnet) on the node image --image names. Without --image it chooses, and says which
and why: kind's published node image of Kubernetes 1.34, pinned by digest, where Docker holds it
or can pull it within 3 minutes (then a single node gets kind's own pod network, kindnet, in
place of clusters/kind.yaml); else mlkube's offline node image, which it builds from Go modules
when Docker's image store lacks it (clusters/nodeimage/build.sh: 10-40 minutes the first time on
2 cores, seconds after). MLKUBE_PUBLISHED_NODE_IMAGE=NAME@sha256:... names a copy of the published
image elsewhere (a mirror). It never takes kind's own default image: another Kubernetes version.

It builds the operator image with go build and tags it by its digest, loads it into every node,
applies the CRDs, RBAC and Deployment with server-side apply, and waits until the operator is
available. Every step prints what it does and its duration, and is skipped when already done: an
image is built only when the hash of its sources names no image the nodes hold, so on an existing
cluster with unchanged source up builds nothing and only checks. It leaves kubectl on the
cluster's context (kind-<name>).

It also runs a local image registry that the host and every node reach at localhost:5001: CNCF
Distribution's registry, built from Go modules (about two minutes the first time, cached after),
in the container mlkube-registry on kind's Docker network, its images in the Docker volume
mlkube-registry-data. Push to it (docker push localhost:5001/my-trainer:v1) and name that image in
a job; every node pulls it from there. The nodes learn the name from containerd's hosts.toml, and
tools that build for the cluster (Tilt, Skaffold, ctlptl) from the ConfigMap
kube-public/local-registry-hosting. One registry serves every devctl cluster; its images outlive
up, a new build of the registry, and down (devctl down --registry deletes them). --registry=false
leaves it out.

--kueue also runs Kueue ` + kueue.Version + `, which queues jobs and admits them as quota allows. up builds
Kueue's manager from Go modules (hack/kueue/go.mod; the longest build of all the first time, 5 to
10 minutes on 2 cores, beside the cluster's creation; cached in ~/.cache/mlkube/bin after, so
nothing), wraps it in the image mlkube/kueue, loads it into the nodes, and installs Kueue from its
own Helm chart (in the Go module cache) before the operator, with every kind among Kueue's
externalFrameworks and waitForPodsReady on: an admitted job whose pods are not all ready within
--kueue-pods-ready-timeout is evicted and requeued, after a backoff. It waits until Kueue's
webhooks answer, then makes the default queues: the ResourceFlavor default-flavor, the ClusterQueue
mlkube (quota: the cpu and memory, and GPUs, that the nodes can give pods; open to every namespace)
and the LocalQueue default in namespace default. The operator runs its Kueue integration (--kueue).
Queue a job with the label kueue.x-k8s.io/queue-name: default: it stays suspended, its Suspended
condition saying why, until Kueue admits it. Run again, up changes nothing; a queue you changed by
hand is kept as it is. Once Kueue is installed, up without --kueue keeps the integration on.`,
		Example: `  # a cluster named mlkube from clusters/kind.yaml, on the offline node image
  devctl up

  # the same with a node image of your own
  devctl up --image mlkube/kind-node:v1.34.4

  # after changing the operator: rebuild, load and roll out only what changed
  devctl up

  # one control plane and two workers, the pod network flannel (host-gw), to spread a job's
  # replicas over nodes
  devctl up --name multi --workers 2

  # your trainer through the local registry, pulled by every node
  docker build -t localhost:5001/my-trainer:v1 . && docker push localhost:5001/my-trainer:v1

  # Kueue with the default queues: a job labelled kueue.x-k8s.io/queue-name: default waits in
  # them until Kueue admits it; a short waitForPodsReady timeout, to watch an eviction
  devctl up --kueue --kueue-pods-ready-timeout 1m
  kubectl get clusterqueues,localqueues -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.NoRegistry = !withRegistry
			if opts.KueuePodsReadyTimeout <= 0 {
				return commands.UsageError(fmt.Errorf("--kueue-pods-ready-timeout must be more than 0, not %s", opts.KueuePodsReadyTimeout))
			}
			return up.Run(cmd.Context(), opts, cmd.ErrOrStderr(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", opts.Name, "name of the kind cluster")
	cmd.Flags().StringVar(&opts.Config, "config", "", "kind config file (default: clusters/kind.yaml of the checkout, else one node without kindnet)")
	cmd.Flags().StringVar(&opts.NodeImage, "image", "", "kind node image, overriding the config's (default: kind's published image where it can be had, else mlkube's offline node image, built when missing)")
	cmd.Flags().IntVar(&opts.Workers, "workers", 0, "create the cluster with one control plane and this many worker nodes, networked by the node image's pod network (flannel offline, kindnet on kind's image), in place of --config (0: the config's nodes, one by default)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", opts.Wait, "how long to wait for the control plane, then for Kueue (--kueue), the operator")
	cmd.Flags().BoolVar(&withRegistry, "registry", true, "run the local registry at localhost:5001 and make the nodes pull from it (--registry=false: none)")
	cmd.Flags().BoolVar(&opts.Kueue, "kueue", false, "also install Kueue "+kueue.Version+" with the default queues (ClusterQueue mlkube, LocalQueue default), and run the operator's Kueue integration")
	cmd.Flags().DurationVar(&opts.KueuePodsReadyTimeout, "kueue-pods-ready-timeout", opts.KueuePodsReadyTimeout, "with --kueue: Kueue evicts and requeues an admitted job whose pods are not all ready within this long (waitForPodsReady)")
	return cmd
}

func downCommand() *cobra.Command {
	name := cluster.DefaultName
	withRegistry := false
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the cluster and its kubeconfig context",
		Long: `Down deletes the kind cluster (its node containers, with everything that ran in it) and
removes the kind-<name> context, cluster and user that kind wrote to your kubeconfig. When there
is no such cluster it says so and succeeds.

The local registry at localhost:5001 serves every devctl cluster, so down keeps it running with
the images pushed to it, and says so: the next devctl up finds them there. --registry deletes it
as well, its container and the volume with its images.`,
		Example: `  devctl down
  devctl down --name experiment

  # the cluster, and the local registry with every image pushed to it
  devctl down --registry`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Down(cmd.Context(), name, withRegistry, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "name of the kind cluster")
	cmd.Flags().BoolVar(&withRegistry, "registry", false, "also delete the local registry (container "+registry.Container+") and every image pushed to it")
	return cmd
}

func statusCommand() *cobra.Command {
	name := cluster.DefaultName
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's nodes, the operator, Kueue, the local registry, the CRDs and jobs of every kind by state",
		Long: `Status reports on the cluster through the kubeconfig kind keeps for it, whatever your current
kubectl context is: whether each node is Ready, whether the operator Deployment is available and
which version and image it runs, whether Kueue (devctl up --kueue) runs and its ClusterQueues with
their admitted and pending workloads, whether the local registry runs and what it holds, whether the
CRD of each kind (` + kindsAnd + `) is established, and how many jobs of each
kind are in each state across all namespaces. It fails only when it cannot look (no Docker, no cluster, no
API server); what it finds unhealthy it reports.`,
		Example: `  devctl status
  devctl status --name experiment`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Status(cmd.Context(), name, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "name of the kind cluster")
	return cmd
}

// completeJob completes a JOB argument with the names of the jobs in the namespace the command's
// -n gives (else the context's), of its --kind when set.
func completeJob(namespace, kind *string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return commands.JobNames(cmd.Context(), *namespace, *kind, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

func suspendCommand(suspend bool) *cobra.Command {
	opts := commands.SuspendOptions{Suspend: suspend, Wait: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "suspend JOB",
		Short: "Suspend a job: delete its running pods and create none until it is resumed",
		Long: `Suspend sets the job's runPolicy.suspend to true and waits until the operator says it acted:
the job's unfinished pods are deleted and none is created, with condition Suspended, as for a
Kubernetes Job (finished pods and restarts counted so far stay; the activeDeadlineSeconds clock
restarts on resume). devctl resume undoes it. JOB is found by its name among all kinds; --kind
says which when two kinds have a job of that name.`,
		Example: `  devctl suspend distributed
  devctl suspend mnist --kind mxjob -n team-a`,
	}
	if !suspend {
		cmd.Use, cmd.Short = "resume JOB", "Resume a suspended job: its replicas are created again"
		cmd.Long = `Resume sets the job's runPolicy.suspend to false and waits until the operator says it resumed
it: once the pods the suspension deleted are gone, the replicas are created again, and
activeDeadlineSeconds counts from then. A job created suspended (as queues such as Kueue create
them) starts this way.`
		cmd.Example = `  devctl resume distributed`
	}
	cmd.Args = args(1)
	cmd.ValidArgsFunction = completeJob(&opts.Namespace, &opts.Kind)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts.Job = args[0]
		return commands.Suspend(cmd.Context(), opts, cmd.OutOrStdout())
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "namespace of the job (default: the kubeconfig context's)")
	f.StringVar(&opts.Kind, "kind", "", kindFlag)
	f.DurationVar(&opts.Wait, "wait", opts.Wait, "how long to wait for the operator to act; 0 returns once the field is set")
	return cmd
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print devctl's version and the operator's in the cluster",
		Long: `Version prints the source revision devctl was built from and, for the cluster of the current
kubeconfig context, the operator's version as devctl up installed it, its image and how many of
its replicas are available. A cluster that does not answer is said, not an error.`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Version(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

// buildCommand is hidden: it is make up's (hack/up.sh), not a user's.
func buildCommand() *cobra.Command {
	opts := commands.BuildOptions{Out: "bin/devctl"}
	cmd := &cobra.Command{
		Use:    "build",
		Hidden: true,
		Short:  "Build devctl itself from the checkout, only when its sources changed (make up does)",
		Long: `Build compiles devctl from the checkout it runs in (go build ./devctl/cmd/devctl) into -o, which
it replaces in one rename: a devctl that runs from it meanwhile, this one included, keeps running.
make up (hack/up.sh) runs ` + "`bin/devctl build --if-changed`" + ` before ` + "`bin/devctl up`" + `.

With --if-changed it first hashes what goes into the build, as devctl up keys its images: the
files of every package of this module that devctl imports, as go list selects them; the versions
of the other modules; go.mod and go.sum; the toolchain and the go environment. It builds only
when that hash is not the one recorded, with the binary's size and time, in the stamp beside -o
(bin/.devctl.stamp): go build's own up-to-date check takes over a second on 2 cores, the hash
less than half of that. A binary that another build replaced (make build) is rebuilt once. A
source changed during the build leaves no stamp, so the next run builds again.`,
		Example: `  # what make up runs before devctl up
  bin/devctl build --if-changed

  # build again whatever the stamp says
  bin/devctl build`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return commands.Build(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "output", "o", opts.Out, "the binary to write")
	cmd.Flags().BoolVar(&opts.IfChanged, "if-changed", false, "build only when devctl's sources changed since the stamp beside the binary was written")
	return cmd
}

// kindConfigCommand is hidden: it is hack/bench-up.sh's, not a user's.
func kindConfigCommand() *cobra.Command {
	var workers int
	var netDir string
	cmd := &cobra.Command{
		Use:    "kind-config",
		Hidden: true,
		Short:  "Print the kind config devctl up --workers N creates a cluster from",
		Long: `Kind-config prints the kind config that ` + "`devctl up --workers N`" + ` creates a cluster from: one
control plane and N workers, the pod network the node image's own (flannel offline, kindnet on
kind's published image), each node's /etc/cni/net.d mounted from a folder of its own,
--net-dir/node-0 (the control plane) to --net-dir/node-N. It makes those folders, empty: a
network config left by an earlier cluster would make a node Ready before its pod network runs.
devctl up keeps them in its cache, under the cluster's name; here --net-dir says where.

hack/bench-up.sh creates a bare kind cluster from it, to time devctl up --workers against kind
alone. The config leaves out what devctl up adds for the local registry (containerd's
config_path, for hosts.toml).`,
		Example: `  devctl kind-config --workers 2 --net-dir /tmp/bench-net > /tmp/bench-net/kind.yaml
  kind create cluster --name bench --config /tmp/bench-net/kind.yaml`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workers < 1 || netDir == "" {
				return commands.UsageError(fmt.Errorf("give --workers 1 or more and --net-dir; see devctl %s --help", cmd.Name()))
			}
			dir, err := filepath.Abs(netDir)
			if err != nil {
				return err
			}
			return up.KindConfig(workers, dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 0, "how many worker nodes, beside the control plane")
	cmd.Flags().StringVar(&netDir, "net-dir", "", "the folder that holds each node's network config folder (node-0, node-1, ...)")
	return cmd
}
