// Package tui is tfjob-tui, a live terminal dashboard of mlkube's jobs (every kind): the job
// list, a job's replica pods, conditions and events, a replica's logs, and its TensorBoard,
// with k9s's keys. It only reads from the cluster. See docs/tui.md.
//
// The program is tui/cmd/tfjob-tui; Run is the same dashboard for other commands to embed
// (devctl dashboard).
package tui

import (
	"context"

	"github.com/mlkube/mlkube/tui/internal/app"
)

// Options say where to look and how to draw: kubeconfig, context, namespace (or all of them),
// colour, or a ready rest.Config.
type Options = app.Options

// Run runs the dashboard in the terminal until the user quits (q, ctrl-c) or ctx is done.
// What goes wrong before the screen opens (no kubeconfig, cluster unreachable, the CRDs not
// installed) is returned as an error that says what to do; what goes wrong later (forbidden,
// the cluster going away) is shown on screen while the dashboard retries.
func Run(ctx context.Context, o Options) error {
	return app.Run(ctx, o, app.Hooks{})
}

// Hooks let a program that drives the dashboard itself (bench/tui) wrap its model, give it
// program options and reach the program.
type Hooks = app.Hooks

// RunWith is Run with hooks.
func RunWith(ctx context.Context, o Options, h Hooks) error { return app.Run(ctx, o, h) }
