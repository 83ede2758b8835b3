package ui

import "charm.land/bubbles/v2/key"

// keys are k9s's where k9s has one: ? help, / filter, j/k, enter in, esc back, l logs, q quit.
type keys struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Enter, Back, Quit, Help                 key.Binding
	Filter, Sort, Tensorboard, Logs         key.Binding
	PrevReplica, NextReplica                key.Binding
	Follow, Timestamps, Previous            key.Binding
	Search, NextMatch, PrevMatch            key.Binding
}

func newKeys() keys {
	b := key.NewBinding
	k, h := key.WithKeys, key.WithHelp
	return keys{
		Up:          b(k("k", "up"), h("j/k", "move")),
		Down:        b(k("j", "down"), h("j", "down")),
		PageUp:      b(k("pgup", "ctrl+b", "ctrl+u"), h("pgup/pgdn", "page")),
		PageDown:    b(k("pgdown", "ctrl+f", "ctrl+d", "space"), h("pgdn", "page down")),
		Top:         b(k("g", "home"), h("g/G", "top/bottom")),
		Bottom:      b(k("G", "end"), h("G", "bottom")),
		Enter:       b(k("enter"), h("enter", "open")),
		Back:        b(k("esc"), h("esc", "back")),
		Quit:        b(k("q", "ctrl+c"), h("q", "quit")),
		Help:        b(k("?"), h("?", "help")),
		Filter:      b(k("/"), h("/", "filter")),
		Sort:        b(k("s"), h("s", "sort")),
		Tensorboard: b(k("b"), h("b", "tensorboard")),
		Logs:        b(k("l", "enter"), h("l", "logs")),
		PrevReplica: b(k("["), h("[ ]", "replica")),
		NextReplica: b(k("]"), h("]", "next replica")),
		Follow:      b(k("f"), h("f", "follow")),
		Timestamps:  b(k("t"), h("t", "time")),
		Previous:    b(k("p"), h("p", "previous")),
		Search:      b(k("/"), h("/", "search")),
		NextMatch:   b(k("n"), h("n/N", "match")),
		PrevMatch:   b(k("N"), h("N", "previous match")),
	}
}

// keyMap is the bindings of one view, for the hint bar and the help screen.
type keyMap struct {
	short []key.Binding
	full  [][]key.Binding
}

func (k keyMap) ShortHelp() []key.Binding  { return k.short }
func (k keyMap) FullHelp() [][]key.Binding { return k.full }

func (k keys) jobList() keyMap {
	return keyMap{
		short: []key.Binding{k.Up, k.Enter, k.Logs, k.Filter, k.Sort, k.Tensorboard, k.Help, k.Quit},
		full: [][]key.Binding{
			{k.Up, k.PageUp, k.Top},
			{k.Enter, k.Logs, k.Tensorboard},
			{k.Filter, k.Sort, k.Back},
			{k.Help, k.Quit},
		},
	}
}

func (k keys) jobView() keyMap {
	logs := k.Logs
	logs.SetHelp("l/enter", "logs")
	tb := k.Tensorboard
	tb.SetHelp("b", "port-forward on/off")
	return keyMap{
		short: []key.Binding{k.Up, logs, tb, k.Back, k.Help, k.Quit},
		full: [][]key.Binding{
			{k.Up, k.PageUp, k.Top},
			{logs, tb, k.Back},
			{k.Help, k.Quit},
		},
	}
}

func (k keys) logs() keyMap {
	return keyMap{
		short: []key.Binding{k.Up, k.PrevReplica, k.Follow, k.Timestamps, k.Previous, k.Search, k.NextMatch, k.Back, k.Help, k.Quit},
		full: [][]key.Binding{
			{k.Up, k.PageUp, k.Top},
			{k.PrevReplica, k.Follow, k.Timestamps, k.Previous},
			{k.Search, k.NextMatch, k.Back},
			{k.Help, k.Quit},
		},
	}
}

func (k keys) input() keyMap {
	enter := key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply"))
	esc := key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear"))
	quit := key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit"))
	return keyMap{short: []key.Binding{enter, esc, quit}, full: [][]key.Binding{{enter, esc, quit}}}
}

func (k keys) helpScreen() keyMap {
	close := key.NewBinding(key.WithKeys("?", "esc"), key.WithHelp("?/esc", "close help"))
	return keyMap{short: []key.Binding{close, k.Quit}, full: [][]key.Binding{{close, k.Quit}}}
}
