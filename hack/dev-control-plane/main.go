// Command dev-control-plane runs the same kube-apiserver and etcd the tests use, with mlkube's
// CRDs installed, and writes a kubeconfig for it, so the operator can be tried on a machine with
// no cluster at all (`make run`). There is no kubelet: pods are created but never run.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/mlkube/mlkube/internal/controlplane"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", "bin/dev.kubeconfig", "where to write the kubeconfig of the control plane")
	flag.Parse()
	os.Setenv("MLKUBE_REQUIRE_ENVTEST", "1")

	env, _, err := controlplane.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev-control-plane:", err)
		os.Exit(1)
	}
	defer env.Stop()
	if err := os.MkdirAll(filepath.Dir(*kubeconfig), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "dev-control-plane:", err)
		return
	}
	// Written last and atomically: its appearance tells scripts the apiserver is ready.
	tmp := *kubeconfig + ".tmp"
	if err := os.WriteFile(tmp, env.KubeConfig, 0o600); err == nil {
		err = os.Rename(tmp, *kubeconfig)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev-control-plane:", err)
		return
	}
	defer os.Remove(*kubeconfig)
	fmt.Printf("kube-apiserver and etcd running; kubeconfig: %s\n", *kubeconfig)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
