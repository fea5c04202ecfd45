package main

import (
	"fmt"
	"io"
	"time"
)

// progress shows how far a long operation got on standard error when that
// is a terminal: one line, rewritten in place and erased when the
// operation ends. A pipe or a file gets none of it, so scripts and logs
// see only the command's output and its one-line errors.
type progress struct {
	w      io.Writer // nil when standard error is not a terminal
	prefix string
	shown  bool
	last   time.Time
}

// progressEvery bounds how often the line is rewritten: a terminal
// redrawn for every page of a large history would spend more time drawing
// than the command spends reading.
const progressEvery = 100 * time.Millisecond

// newProgress returns the progress line of cmd. streams says that the
// command writes its output as it goes (export, migrate): when that output
// is the terminal too, it shows how far the command got, and a progress
// line would be cut into it; such a command shows progress only when its
// output goes to a file or a pipe.
func newProgress(e *env, cmd string, streams bool) *progress {
	if !isTerminal(e.stderr) || streams && isTerminal(e.stdout) {
		return &progress{}
	}
	return &progress{w: e.stderr, prefix: "wasmhist " + cmd + ": "}
}

// show replaces the line with the formatted text; the first call always
// draws, later ones at most every progressEvery.
func (p *progress) show(format string, args ...any) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if p.shown && now.Sub(p.last) < progressEvery {
		return
	}
	p.shown, p.last = true, now
	fmt.Fprintf(p.w, "\r\033[K%s%s", p.prefix, fmt.Sprintf(format, args...))
}

// done erases the line, so that what comes next (a result, an error)
// starts a clean one.
func (p *progress) done() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
