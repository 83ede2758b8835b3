// Command nodeprobe finds a node's NVIDIA driver with NVML and publishes where its libraries
// and tools are, as the accelerator config the mlkube operator mounts into GPU containers.
//
//	nodeprobe detect    what this node has, printed
//	nodeprobe publish   the DaemonSet mode: annotate the node, keep the ConfigMap up to date
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
)

// Version is set at build time (-ldflags -X).
var Version = "dev"

// Exit codes, documented in docs/nodeprobe.md; scripts tell "no driver" from "broken" by them.
const (
	exitOK       = 0
	exitError    = 1 // anything else: unreadable files, no cluster, API errors at start
	exitUsage    = 2 // bad flags or arguments
	exitNoDriver = 3 // no NVIDIA driver on this node
	exitNoNVML   = 4 // the driver's files are there, NVML did not answer; the finding is printed
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process: tests call it, and run the binary for what needs one.
func run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:   "nodeprobe",
		Short: "Find this node's NVIDIA driver and publish where it is",
		Long: "nodeprobe finds the node's NVIDIA driver with NVML (driver and CUDA versions, GPUs) and\n" +
			"where its libraries and tools are on the host, and turns that into the accelerator config\n" +
			"the mlkube operator mounts into containers that ask for nvidia.com/gpu.",
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A tool for nodes and DaemonSets: no shell completion to install.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(detectCommand(), publishCommand())
	return exitCode(root.Execute(), stderr)
}

// usageError is a mistake on the command line.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitCode prints err once, here at the edge, and maps it to the exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "nodeprobe:", err)
	var nd *driver.NoDriverError
	var ne *driver.NVMLError
	var ue usageError
	switch {
	case errors.As(err, &nd):
		return exitNoDriver
	case errors.As(err, &ne):
		return exitNoNVML
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "unknown command"), errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stderr, "Run 'nodeprobe --help' for usage.")
		return exitUsage
	}
	return exitError
}

// noArgs refuses positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", args[0])}
	}
	return nil
}
