package commands

import (
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/devctl/internal/convert"
	"github.com/mlkube/mlkube/devctl/internal/follow"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// convertManifest is convert.Convert; tests may put another in its place.
var convertManifest = convert.Convert

// Convert prints the job (of any kind) of file, converted to today's API, as YAML on out;
// what the conversion changed or dropped goes to status as warnings. file "-" is the standard
// input.
func Convert(file string, stdin io.Reader, out, status io.Writer) error {
	job, err := loadJob(file, stdin, status)
	if err != nil {
		return err
	}
	data, err := convert.YAML(job)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

// loadJob reads the one job (of any kind) of file, in any format the convert package reads,
// converts it and prints its warnings ("warning: converted from ..."). What cannot be read or
// converted is a usage error: there is nothing to run.
func loadJob(file string, stdin io.Reader, status io.Writer) (client.Object, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, UsageError(err)
	}
	docs, err := convert.Split(data)
	if err != nil {
		return nil, UsageError(fmt.Errorf("%s: %w", file, err))
	}
	if len(docs) != 1 {
		return nil, UsageError(fmt.Errorf("%s holds %d documents; give one job per file", file, len(docs)))
	}
	res, err := convertManifest(docs[0])
	if err != nil {
		return nil, UsageError(fmt.Errorf("%s: %w", file, err))
	}
	named := res.From == ""
	for _, w := range res.Warnings {
		named = named || strings.Contains(w, res.From)
	}
	if !named {
		fmt.Fprintf(status, "warning: converted %s from %s to today's %s %s\n", file, res.From, v1beta1.GroupVersion, follow.KindOf(res.Job).Name)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(status, "warning: %s\n", w)
	}
	return res.Job, nil
}
