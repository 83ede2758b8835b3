package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/mlkube/mlkube/tui"
)

// The child runs the dashboard as the tfjob-tui binary does, with its frames going nowhere
// (a 120x40 screen, no terminal) but timed. It talks with the parent over stdin and stdout:
//
//	parent: watch TEXT   child: ok TEXT, then, once a frame holding TEXT is written:
//	                            seen TEXT UNIXNANO
//	parent: watch !TEXT  the same for the first frame not holding TEXT
//	parent: key NAME     (enter, esc, or a letter) pressed in the dashboard
//
// A frame is "written" when Bubble Tea's renderer writes it to the terminal: the first write
// after a View that holds the text. That is what a person would see.

const (
	childWidth  = 120
	childHeight = 40
)

type probe struct {
	mu      sync.Mutex
	pending map[string]bool // waited for, not in a view yet
	inView  map[string]bool // in a view, not written yet
	out     *bufio.Writer
}

func (p *probe) say(format string, args ...any) {
	fmt.Fprintf(p.out, format+"\n", args...)
	p.out.Flush()
}

func (p *probe) watch(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending[text] = true
	p.say("ok %s", text)
}

// viewed is called with every view the program draws.
func (p *probe) viewed(content string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.pending {
		if gone, ok := strings.CutPrefix(t, "!"); ok && !strings.Contains(content, gone) || !ok && strings.Contains(content, t) {
			delete(p.pending, t)
			p.inView[t] = true
		}
	}
}

// Write is the terminal.
func (p *probe) Write(b []byte) (int, error) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.inView {
		delete(p.inView, t)
		p.say("seen %s %d", t, now)
	}
	return len(b), nil
}

// model wraps the root model to show every view to the probe.
type model struct {
	tea.Model
	p *probe
}

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	next, cmd := m.Model.Update(msg)
	m.Model = next
	return m, cmd
}

func (m model) View() tea.View {
	v := m.Model.View()
	m.p.viewed(v.Content)
	return v
}

func child() error {
	if addr := os.Getenv("BENCH_PPROF"); addr != "" { // e.g. localhost:6060, to profile the dashboard
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
	p := &probe{pending: map[string]bool{}, inView: map[string]bool{}, out: bufio.NewWriter(os.Stdout)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	programs := make(chan *tea.Program, 1)
	go func() {
		prog := <-programs
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			cmd, arg, _ := strings.Cut(in.Text(), " ")
			switch cmd {
			case "watch":
				p.watch(arg)
			case "key":
				prog.Send(keyMsg(arg))
			}
		}
		cancel() // the parent is gone
	}()
	opts := []tea.ProgramOption{
		tea.WithInput(nil), tea.WithOutput(p), tea.WithWindowSize(childWidth, childHeight),
		tea.WithoutSignalHandler(),
	}
	if fps, err := strconv.Atoi(os.Getenv("BENCH_FPS")); err == nil { // to try other frame rates
		opts = append(opts, tea.WithFPS(fps))
	}
	return tui.RunWith(ctx, tui.Options{Kubeconfig: os.Getenv("BENCH_KUBECONFIG"), Namespace: os.Getenv("BENCH_NAMESPACE")}, tui.Hooks{
		Wrap:           func(m tea.Model) tea.Model { return model{Model: m, p: p} },
		ProgramOptions: opts,
		Program:        func(prog *tea.Program) { programs <- prog },
	})
}

func keyMsg(name string) tea.KeyPressMsg {
	switch name {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	}
	r := []rune(name)[0]
	return tea.KeyPressMsg{Code: r, Text: name}
}

var _ io.Writer = (*probe)(nil)
