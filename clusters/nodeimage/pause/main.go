// Command pause is the pod sandbox's first process in the offline kind node image: it holds
// the pod's namespaces, reaps orphaned children, and exits on SIGTERM or SIGINT. Kubernetes'
// own pause image does the same; this one is built here because no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that exited: as PID 1 of the sandbox, orphans land on us.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
