// Package app wires tfjob-tui together: kubeconfig, the checks that come before the screen,
// the cluster client and the Bubble Tea program. The public entry point is tui.Run; the
// benchmark uses Hooks to watch frames.
package app

import (
	"context"
	"errors"
	"os"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/mlkube/mlkube/tui/internal/kube"
	"github.com/mlkube/mlkube/tui/internal/ui"
)

// Options say where to look and how to draw.
type Options struct {
	// Kubeconfig is the kubeconfig file; empty: $KUBECONFIG, else ~/.kube/config.
	Kubeconfig string
	// Context is the kubeconfig context; empty: the current one.
	Context string
	// Namespace to show; empty: the context's namespace, else default.
	Namespace string
	// AllNamespaces shows the jobs of every namespace (Namespace is then ignored).
	AllNamespaces bool
	// NoColor draws without colours (bold, underline and reverse only). The NO_COLOR
	// environment variable does the same.
	NoColor bool
	// Config, when set, is used instead of the kubeconfig (Kubeconfig and Context are ignored).
	Config *rest.Config
}

// FrameRate caps how often the screen is written. Bubble Tea's renderer wakes this often
// whether or not anything changed, and with the job list's clock redrawing only what is on
// screen those wake-ups are nearly all an idle dashboard does: at 5,000 jobs on a 2-core VM
// the idle job list took 0.43-0.57% of a core at 30 frames a second, 0.27-0.37% at 20, against
// a budget of 0.5% (bench/tui, docs/performance.md). At 20 a change waits at most 50 ms for
// its frame, within the 100 ms the change-to-screen p99 may take.
const FrameRate = 20

// Hooks let a benchmark look at the program from inside.
type Hooks struct {
	Wrap           func(tea.Model) tea.Model // wraps the root model
	ProgramOptions []tea.ProgramOption
	Program        func(*tea.Program) // called with the program before it runs
}

// Run checks the cluster, then runs the dashboard until the user quits or ctx is done.
// Errors before the screen opens (no kubeconfig, cluster unreachable, CRDs missing) come back
// as errors that say what to do.
func Run(ctx context.Context, o Options, h Hooks) error {
	// client-go logs through klog, which would write over the screen.
	klog.SetLogger(logr.Discard())

	cfg, target, err := config(o)
	if err != nil {
		return err
	}
	kinds, err := kube.Served(ctx, cfg, kube.Kinds)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := kube.NewClient(cfg, target, kinds, kube.NewFeed(time.Second/FrameRate))
	if err != nil {
		return err
	}
	noColor := o.NoColor || os.Getenv("NO_COLOR") != ""
	var model tea.Model = ui.New(ui.Config{Context: ctx, Cluster: client, Target: target, Kinds: kinds, NoColor: noColor})
	if h.Wrap != nil {
		model = h.Wrap(model)
	}
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithFPS(FrameRate)}
	if noColor {
		opts = append(opts, tea.WithColorProfile(colorprofile.Ascii))
	}
	p := tea.NewProgram(model, append(opts, h.ProgramOptions...)...)
	if h.Program != nil {
		h.Program(p)
	}
	_, err = p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // the caller ended it
	}
	if errors.Is(err, tea.ErrInterrupted) {
		return nil
	}
	return err
}

func config(o Options) (*rest.Config, kube.Target, error) {
	if o.Config == nil {
		return kube.Load(o.Kubeconfig, o.Context, o.Namespace, o.AllNamespaces)
	}
	t := kube.Target{Server: o.Config.Host, Namespace: o.Namespace}
	switch {
	case o.AllNamespaces:
		t.Namespace = ""
	case t.Namespace == "":
		t.Namespace = "default"
	}
	return o.Config, t, nil
}
