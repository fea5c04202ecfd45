package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/agent"
)

// askBeforeFlag is --ask-before: the tools a person approves before each
// call (agent.Tool.NeedsApproval), comma-separated or repeated.
type askBeforeFlag map[string]bool

func (f askBeforeFlag) String() string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func (f askBeforeFlag) Set(v string) error {
	known := map[string]bool{}
	var names []string
	for _, t := range tools() {
		known[t.Name] = true
		names = append(names, t.Name)
	}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if !known[n] {
			return fmt.Errorf("no tool %q: the tools are %s", n, strings.Join(names, ", "))
		}
		f[n] = true
	}
	return nil
}

// chatTools are the command's tools, those named by --ask-before marked
// as needing approval.
func (c *chatSetup) chatTools() []agent.Tool {
	out := tools()
	for i := range out {
		out[i].NeedsApproval = c.askBefore[out[i].Name]
	}
	return out
}

// settleApprovals asks the person about each tool call the session holds
// awaiting approval (a turn ended on it, or an earlier chat did and ended
// before the answer) and runs the turn that carries the decisions, until
// none waits. It reports false when the input ended (or Ctrl-C was typed)
// at a question: the request stays in the session, asked again when the
// chat resumes it.
func (c *chatSetup) settleApprovals(ctx context.Context, e *env, cmd string, src func() lineSource) (bool, error) {
	for {
		reqs := agent.PendingApprovals(c.session)
		if len(reqs) == 0 {
			return true, nil
		}
		var ds []agent.Decision
		for _, q := range reqs {
			yes, ok, err := askYesNo(ctx, e, src(), fmt.Sprintf("allow tool %s? [y/n] ", q))
			if err != nil || !ok {
				if err == nil {
					fmt.Fprintf(e.stderr, "wasmhist %s: tool %s awaits your decision; %s, and the chat asks again when it resumes the session\n", cmd, q.Name, c.savedAt())
				}
				return false, err
			}
			if yes {
				ds = append(ds, agent.Approve(q.CallID))
			} else {
				ds = append(ds, agent.Deny(q.CallID, "the user said no"))
			}
		}
		if err := c.respond(ctx, e, cmd, nil, ds); err != nil {
			return false, err
		}
	}
}

// prompter is a line source whose prompt can change: the line editor.
type prompter interface{ setPrompt(string) }

// askYesNo asks question until the answer is y or n; ok is false when the
// input ended or Ctrl-C was typed instead.
func askYesNo(ctx context.Context, e *env, src lineSource, question string) (yes, ok bool, err error) {
	p, edits := src.(prompter)
	if edits {
		p.setPrompt(question)
		defer p.setPrompt(chatPrompt)
	}
	for {
		if !edits {
			fmt.Fprint(e.stdout, question)
		}
		var l line
		select {
		case <-ctx.Done():
			return false, false, ctx.Err()
		case l = <-src.next():
		}
		switch {
		case l.err != nil:
			return false, false, fmt.Errorf("reading standard input: %w", l.err)
		case l.eof, l.interrupted:
			if edits || l.eof {
				fmt.Fprintln(e.stdout)
			}
			return false, false, nil
		}
		switch strings.ToLower(strings.TrimSpace(l.text)) {
		case "y", "yes":
			return true, true, nil
		case "n", "no":
			return false, true, nil
		}
		fmt.Fprintln(e.stdout, "answer y or n")
	}
}
