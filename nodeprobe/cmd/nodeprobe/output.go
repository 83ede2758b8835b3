package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/mlkube/mlkube/nodeprobe/internal/driver"
)

// render prints a finding for people: the facts first, then the config it leads to.
func render(w io.Writer, f *driver.Finding) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	version := f.DriverVersion
	if version == "" {
		version = "unknown"
	}
	if f.CUDADriverVersion != "" {
		version += " (CUDA " + f.CUDADriverVersion + ")"
	}
	fmt.Fprintf(tw, "Driver:\t%s\n", version)
	fmt.Fprintf(tw, "NVML:\t%s\n", f.NVMLLibrary)
	if f.DriverRoot != "/" {
		fmt.Fprintf(tw, "Read under:\t%s (paths here are the node's own)\n", f.DriverRoot)
	}
	fmt.Fprintln(tw)
	if f.NVMLError != "" {
		fmt.Fprintf(tw, "GPUs: unknown, NVML did not answer: %s\n", f.NVMLError)
	} else {
		fmt.Fprintf(tw, "GPUs: %d\n", len(f.GPUs))
		if len(f.GPUs) > 0 {
			fmt.Fprintln(tw, "  INDEX\tNAME\tUUID\tMEMORY")
		}
		for _, g := range f.GPUs {
			if g.Error != "" {
				fmt.Fprintf(tw, "  %d\t%s\t%s\terror: %s\n", g.Index, g.Name, g.UUID, g.Error)
				continue
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d MiB\n", g.Index, g.Name, g.UUID, g.MemoryTotal>>20)
		}
	}
	for _, list := range []struct {
		title string
		files []driver.File
	}{{"Libraries", f.Libraries}, {"Binaries", f.Binaries}} {
		fmt.Fprintf(tw, "\n%s:\n", list.title)
		if len(list.files) == 0 {
			fmt.Fprintln(tw, "  none found")
		}
		for _, file := range list.files {
			fmt.Fprintf(tw, "  %s\t%s\t(%s)\n", file.Name, file.Path, file.FoundBy)
		}
	}
	fmt.Fprintln(tw)
	if f.Runtime != nil {
		fmt.Fprintf(tw, "Runtime:\t%s (%s): it gives containers the driver, so the config mounts nothing\n", f.Runtime.How, f.Runtime.Path)
	} else {
		fmt.Fprintf(tw, "Runtime:\tgives containers no driver: the config mounts each file into the image's own directories\n")
	}
	for _, w := range f.Warnings {
		fmt.Fprintf(tw, "\nWarning: %s\n", w)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	cfg, err := yaml.Marshal(f.Config)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nAccelerator config (what `nodeprobe publish` writes as accelerators.yaml):\n%s",
		indent(string(cfg), "  "))
	return nil
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
