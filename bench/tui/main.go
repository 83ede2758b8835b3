// Command bench measures tfjob-tui on a real kube-apiserver (envtest) holding 500 jobs of 8
// replicas each (4,000 pods): how long a status write takes to reach the screen, the CPU the
// dashboard burns while nothing changes, and its memory. The dashboard runs in a process of
// its own (this program, started again with -child), so its CPU and memory are its own.
//
//	go run ./bench/tui            # the benchmark; -json FILE also writes the numbers
//	go run ./bench/tui -demo      # a control plane with a few example jobs, to look at
//	go run ./bench/tui -demo -jobs 500   # ... and the benchmark's jobs in namespace bench
//	go run ./bench/tui -reuse KUBECONFIG -jobs 500   # the benchmark on the -demo's control
//	                              # plane (the kubeconfig it prints), its jobs already made
//
// See docs/tui.md for the numbers and how they compare with k9s.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var o options
	flag.BoolVar(&o.demo, "demo", false, "start a control plane with example jobs, print how to look at it, and wait")
	flag.BoolVar(&o.child, "child", false, "(internal) run the dashboard for the benchmark")
	flag.IntVar(&o.jobs, "jobs", 500, "jobs to create (with -demo: also this many benchmark jobs in namespace bench; 0 for none)")
	flag.IntVar(&o.samples, "samples", 200, "status writes to time, per view")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "how long to measure idle CPU, per view")
	flag.StringVar(&o.json, "json", "", "also write the results to this file")
	flag.StringVar(&o.kubeconfig, "reuse", "", "a kubeconfig: run the benchmark on its control plane (the one -demo -jobs N started and printed), whose namespace bench holds the N jobs already")
	flag.Parse()

	var err error
	switch {
	case o.child:
		err = child()
	case o.demo:
		n := 0
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "jobs" {
				n = o.jobs
			}
		})
		err = withDir(func(dir string) error { return demo(dir, n) })
	default:
		err = withDir(func(dir string) error { return bench(dir, o) })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	demo, child bool
	jobs        int
	samples     int
	idle        time.Duration
	json        string
	kubeconfig  string
}

func withDir(f func(dir string) error) error {
	dir, err := os.MkdirTemp("", "tfjob-tui-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return f(dir)
}
