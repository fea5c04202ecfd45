package agent

import (
	"context"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

// AfterRunner is an optional interface of a ContextProvider, detected by
// New: a provider that learns from conversations. AfterRun is called inside
// each commit that records messages of a run (once per run with per-run
// persistence, once per model call with per-service-call persistence),
// after the history providers stored them and before the session is
// committed (host/internal/txn/doc.go, step 1, before step 3), with the
// run's transaction in ctx: what a WebAssembly plugin called from AfterRun
// writes commits with the run or not at all.
//
// An error fails that commit: the run's database writes roll back and the
// caller's session stays as it was (per service call, the calls committed
// before stay). Work to do only once the run is committed goes in
// RunCommit.OnCommit.
type AfterRunner interface {
	AfterRun(ctx context.Context, c *RunCommit) error
}

// RunCommit is what an AfterRunner learns from: one commit of a run.
type RunCommit struct {
	// Session is the run's working copy, about to be committed. A change
	// AfterRun makes through its methods (SetState on a slot of its own)
	// commits with the run.
	Session *session.Session
	// Messages are what this commit records of the run, in order: answers
	// to calls an earlier run left open, the caller's input (without
	// loaded history or context-provider messages), the tool results and
	// model responses.
	Messages []abi.Message

	onCommit []func()
}

// OnCommit registers f to run once the commit has passed its commit point;
// it never runs for a commit that failed. f must not fail: the run is
// committed by then.
func (c *RunCommit) OnCommit(f func()) { c.onCommit = append(c.onCommit, f) }

// afterRun calls the AfterRunners with the messages the coming commit
// records (r.learn) and returns the commit's record, whose OnCommit
// functions the caller runs after the commit. r.mu must be held.
func (r *run) afterRun(ctx context.Context) (*RunCommit, error) {
	msgs := r.learn
	r.learn = nil
	if len(msgs) == 0 {
		return nil, nil
	}
	rc := &RunCommit{Session: r.work, Messages: msgs}
	for _, cp := range r.a.cfg.ContextProviders {
		h, ok := cp.(AfterRunner)
		if !ok {
			continue
		}
		if err := h.AfterRun(ctx, rc); err != nil {
			return nil, fmt.Errorf("agent: after-run hook of context provider %q: %w", cp.Name(), err)
		}
	}
	return rc, nil
}

// learnable returns the messages of a commit an AfterRunner sees: msgs
// without loaded history and context-provider messages (which the run did
// not produce).
func learnable(parts ...[]abi.Message) []abi.Message {
	var out []abi.Message
	for _, p := range parts {
		for _, m := range p {
			if m.Source != nil && (m.Source.Type == abi.SourceChatHistory || m.Source.Type == abi.SourceContextProvider) {
				continue
			}
			out = append(out, m)
		}
	}
	return out
}
