package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
	"github.com/mlkube/mlkube/nodeprobe/internal/publish"
	"github.com/mlkube/mlkube/operator/accelerator"
)

type publishOptions struct {
	driver              driver.Options
	namespace, name     string
	node                string
	interval, retryWait time.Duration
	once                bool
}

func publishCommand() *cobra.Command {
	o := publishOptions{retryWait: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "publish --namespace NS --configmap NAME --node NODE",
		Short: "Probe this node again and again; annotate it and keep the operator's ConfigMap up to date",
		Long: "publish is the DaemonSet mode. Each probe records the finding on this node (annotation\n" +
			accelerator.NodeAnnotation + ") and in the ConfigMap the operator reads (key " + publish.KeyConfig + "). A node\n" +
			"without a GPU only annotates itself. Nodes that disagree on the driver's paths are listed in\n" +
			"the ConfigMap's " + publish.KeyConflicts + "; the layout most GPU nodes report is published.\n" +
			"It exits 0 on SIGTERM, and when the node's libnvidia-ml changes (to load the new one on restart).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, req := range [][2]string{{"--namespace", o.namespace}, {"--configmap", o.name}, {"--node (or $NODE_NAME)", o.node}} {
				if req[1] == "" {
					return usageError{fmt.Errorf("%s is required", req[0])}
				}
			}
			if o.interval <= 0 {
				return usageError{fmt.Errorf("--interval must be positive")}
			}
			log := zap.New()
			ctrl.SetLogger(log)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runPublish(ctx, o, log)
		},
	}
	cmd.Flags().StringVar(&o.namespace, "namespace", "", "namespace of the accelerator ConfigMap (the operator's, e.g. mlkube-system)")
	cmd.Flags().StringVar(&o.name, "configmap", "", "name of the accelerator ConfigMap (e.g. mlkube-accelerators)")
	cmd.Flags().StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API)")
	cmd.Flags().DurationVar(&o.interval, "interval", 5*time.Minute, "time between probes")
	cmd.Flags().StringVar(&o.driver.Root, "driver-root", "/", "where the node's root file system is (/host in the DaemonSet)")
	cmd.Flags().BoolVar(&o.driver.Legacy, "legacy-resource", false, "also configure the pre-device-plugin resource "+driver.LegacyResource)
	cmd.Flags().BoolVar(&o.once, "once", false, "probe and publish once, then exit (status 1 if publishing failed)")
	// controller-runtime registers --kubeconfig; without it: $KUBECONFIG, in-cluster, ~/.kube/config.
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		cmd.Flags().AddGoFlag(f)
	}
	return cmd
}

func runPublish(ctx context.Context, o publishOptions, log logr.Logger) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no cluster to talk to: set --kubeconfig or KUBECONFIG, or run in a pod: %w", err)
	}
	cfg.UserAgent = "nodeprobe/" + Version
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	p := &publish.Publisher{Client: c, Namespace: o.namespace, Name: o.name, Log: log}
	log.Info("starting", "version", Version, "node", o.node, "configMap", o.namespace+"/"+o.name, "driverRoot", o.driver.Root, "interval", o.interval)
	loaded := ""
	for {
		wait := o.interval
		report, err := probe(o)
		if err != nil {
			log.Error(err, "probe failed")
			wait = min(o.interval, o.retryWait)
		} else {
			if lib := loadedLibrary(report); loaded == "" {
				loaded = lib
			} else if lib != "" && lib != loaded {
				// The loaded library stays mapped in this process (a library whose symbols the
				// program bound is never unloaded), so a new driver needs a new process.
				log.Info("the node's libnvidia-ml changed since it was loaded; exiting so that the restarted pod loads the new one", "was", loaded, "now", lib)
				return nil
			}
			if f := report.Finding; f != nil && f.Degraded() {
				log.Info("probed; problems met", "finding", f.Summary(), "warnings", f.Warnings)
			} else if f != nil {
				log.Info("probed", "finding", f.Summary())
			} else {
				log.Info("probed: no GPU", "reason", report.NoGPUReason)
			}
			err = p.Publish(ctx, report)
			if err != nil && ctx.Err() == nil {
				log.Error(err, "publishing failed", "retryIn", min(o.interval, o.retryWait).String())
				wait = min(o.interval, o.retryWait)
			}
		}
		if o.once {
			return err
		}
		select {
		case <-ctx.Done():
			log.Info("stopping")
			return nil
		case <-time.After(wait):
		}
	}
}

// probe runs detect and turns its outcome into a report; only unexpected failures are errors.
func probe(o publishOptions) (publish.Report, error) {
	f, err := driver.Detect(o.driver)
	var nd *driver.NoDriverError
	var ne *driver.NVMLError
	switch {
	case errors.As(err, &nd):
		return publish.Report{Node: o.node, NoGPUReason: nd.Error()}, nil
	case err == nil, errors.As(err, &ne):
		return publish.Report{Node: o.node, Finding: f}, nil
	}
	return publish.Report{}, err
}

func loadedLibrary(r publish.Report) string {
	if r.Finding == nil {
		return ""
	}
	return r.Finding.Loaded
}
