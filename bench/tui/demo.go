package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlkube/mlkube/internal/tuifixture"
)

// demo starts a control plane holding the jobs of docs/tfjob-api.md's examples (running,
// failed, succeeded, restarting, one with TensorBoard) and a fake kubelet that serves their
// logs and port-forwards, prints how to point tfjob-tui at it, and waits for ctrl-c.
func demo(dir string, benchJobs int) error {
	c, err := tuifixture.Start(dir)
	if err != nil {
		return err
	}
	defer c.Stop()
	ctx := context.Background()
	if err := tuifixture.Populate(ctx, c, "team-a"); err != nil {
		return err
	}
	if benchJobs > 0 {
		if err := c.Namespace(ctx, "bench"); err != nil {
			return err
		}
		if err := populate(ctx, c, "bench", benchJobs); err != nil {
			return err
		}
	}
	kubelet, err := c.StartKubelet(ctx, "node-1") // logs and port-forwards reach the pods
	if err != nil {
		return err
	}
	defer kubelet.Close()
	kubelet.SetLog("team-a", "mnist-retry-master-0", tuifixture.TfJob.Container, false,
		`INFO:tensorflow:TF_CONFIG environment variable: {"cluster": {"master": ["mnist-retry-master-0.team-a.svc:2222"], ...}, "task": {"type": "master", "index": 0}}`,
		"INFO:tensorflow:Using MirroredStrategy with devices ('/job:master/task:0',)",
		"INFO:tensorflow:global_step/sec: 41.5",
		"step 0 loss=2.3026")
	kubelet.SetLog("team-a", "mnist-retry-worker-1", tuifixture.TfJob.Container, true,
		"step 4100 loss=0.0512",
		"Killed")
	fmt.Printf("control plane up; try:\n  go run ./tui/cmd/tfjob-tui --kubeconfig %s -n team-a\n", c.Kubeconfig)
	if benchJobs > 0 {
		fmt.Printf("  go run ./bench/tui -reuse %s -jobs %d   # the benchmark on these jobs\n", c.Kubeconfig, benchJobs)
	}
	fmt.Println("(ctrl-c stops it)")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
