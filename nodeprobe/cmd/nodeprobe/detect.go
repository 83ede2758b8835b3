package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
)

func detectCommand() *cobra.Command {
	var opts driver.Options
	var output string
	cmd := &cobra.Command{
		Use:   "detect",
		Short: "Print what this node has: driver, GPUs, where the driver's files are, the config",
		Long: "detect loads the node's libnvidia-ml.so.1 from under --driver-root and prints the driver and\n" +
			"CUDA versions, the GPUs, the driver's libraries and tools (host paths) and the accelerator\n" +
			"config nodeprobe publish would write.\n\n" +
			"Exit status: 0 found; 3 no NVIDIA driver; 4 driver files found but NVML did not answer\n" +
			"(the finding is still printed); 2 usage; 1 other errors.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "yaml" && output != "json" {
				return usageError{fmt.Errorf("-o %q: want yaml or json", output)}
			}
			f, err := driver.Detect(opts)
			var ne *driver.NVMLError
			if err != nil && !errors.As(err, &ne) {
				return err
			}
			if perr := printFinding(cmd.OutOrStdout(), f, output); perr != nil {
				return perr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&opts.Root, "driver-root", "/", "where the node's root file system is (/host in the DaemonSet); paths are reported without it")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: human-readable)")
	cmd.Flags().BoolVar(&opts.Legacy, "legacy-resource", false, "also configure the pre-device-plugin resource "+driver.LegacyResource)
	return cmd
}

func printFinding(w io.Writer, f *driver.Finding, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(f)
	case "yaml":
		data, err := yaml.Marshal(f)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return render(w, f)
}
