package agent

import (
	"context"
	"iter"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/session"
)

// RunUpdate is one item of a streamed run: a piece of a model response, a
// complete message (each model message when its call ends, each tool
// result when the tools of an iteration have run), or, last, the run's
// result. Exactly one field is set.
type RunUpdate struct {
	Model   *model.Update
	Message *abi.Message
	// Result is the last item of a run that succeeded and whose consumer
	// did not stop early: what Run would have returned.
	Result *RunResult
}

// Text returns the text of a model update: the piece of the reply to show
// as it arrives. It is empty for complete messages and the result, whose
// text the model updates before them already carried, and for updates
// that carry no text (tool calls, reasoning, usage).
func (u RunUpdate) Text() string {
	if u.Model == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Model.Contents {
		if c.Type == abi.ContentText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// RunStream is Run with the model's output streamed. The sequence yields
// each model update as it arrives and each complete message; it ends with
// the run's result (RunUpdate.Result, the RunResult Run returns) or with a
// non-nil error if the run fails. A consumer that stops early does not
// fail the run: what completed (whole model calls and the tool results
// already produced) is stored, with orphan tool calls removed, and the
// call in flight is abandoned.
//
// A run RunOptions.RunID says was committed (see Run) runs nothing and
// yields what it returned as a live run would have: each model message as
// one model update and then as a complete message, each tool result as a
// complete message, and a result with Replayed set. So a consumer that
// shows only the text of model updates (RunUpdate.Text) shows the
// committed reply again.
func (a *Agent) RunStream(ctx context.Context, s *session.Session, input []abi.Message, opts *RunOptions) iter.Seq2[RunUpdate, error] {
	return func(yield func(RunUpdate, error) bool) {
		stopped := false
		emit := func(u RunUpdate) bool {
			if stopped {
				return false
			}
			if !yield(u, nil) {
				stopped = true
			}
			return !stopped
		}
		rep, err := lookupRun(s, input, opts)
		if err != nil {
			yield(RunUpdate{}, err)
			return
		}
		if rep != nil {
			// A repeated run: first the messages the earlier attempt
			// returned; then, if it stopped before it finished, the rest
			// of it.
			msgs := rep.prior
			if rep.replay != nil {
				msgs = rep.replay.Messages
			}
			if !replayMessages(msgs, emit) {
				return
			}
			if rep.replay != nil {
				yield(RunUpdate{Result: rep.replay}, nil)
				return
			}
			input = nil
		}
		r, err := a.newRun(ctx, s, input, opts, emit)
		if err != nil {
			yield(RunUpdate{}, err)
			return
		}
		r.continues(rep)
		res, err := r.execute(ctx)
		switch {
		case err != nil && !stopped:
			yield(RunUpdate{}, err)
		case err != nil:
			a.log.Warn("agent: storing a run the consumer stopped failed", "session", s.SessionID, "error", err)
		case !stopped:
			if rep != nil {
				res.Messages = concat(rep.prior, res.Messages)
			}
			yield(RunUpdate{Result: res}, nil)
		}
	}
}

// replayMessages yields messages an earlier attempt of the run returned
// as the live run yielded them: a model message as one whole update, then
// as a complete message; a tool result as a complete message only.
func replayMessages(msgs []abi.Message, emit func(RunUpdate) bool) bool {
	for i := range msgs {
		m := msgs[i]
		if m.Role == abi.RoleAssistant {
			u := model.Update{MessageID: m.MessageID, Role: m.Role, Contents: m.Contents}
			if !emit(RunUpdate{Model: &u}) {
				return false
			}
		}
		if !emit(RunUpdate{Message: &m}) {
			return false
		}
	}
	return true
}

// aggregator folds the updates of one streamed model call into the
// messages of a model.Response. Each call is aggregated on its own, so the
// tool-call round and the answer after the tools never fold into one
// message (the folding that leaves orphan calls in stored history).
type aggregator struct {
	msgs   []abi.Message
	curID  string
	role   abi.Role
	open   bool // msgs' last message takes further content
	convID string
	usage  *abi.Usage
	finish string
}

// add folds one update in. Text and reasoning parts are deltas appended to
// the previous part of the same type; other parts arrive whole. A new
// MessageID, or a new role, starts a new message.
func (a *aggregator) add(u model.Update) {
	if u.ConversationID != "" {
		a.convID = u.ConversationID
	}
	if u.Usage != nil {
		if a.usage == nil {
			a.usage = &abi.Usage{}
		}
		addUsage(a.usage, u.Usage)
	}
	if u.FinishReason != "" {
		a.finish = u.FinishReason
	}
	if u.MessageID != "" && u.MessageID != a.curID {
		a.curID, a.open = u.MessageID, false
	}
	if u.Role != "" {
		if a.open && u.Role != a.role {
			a.open = false
		}
		a.role = u.Role
	}
	for _, c := range u.Contents {
		if !a.open {
			role := a.role
			if role == "" {
				role = abi.RoleAssistant
			}
			a.msgs = append(a.msgs, abi.Message{Role: role, MessageID: a.curID})
			a.open = true
		}
		m := &a.msgs[len(a.msgs)-1]
		if n := len(m.Contents); n > 0 && (c.Type == abi.ContentText || c.Type == abi.ContentReasoning) &&
			m.Contents[n-1].Type == c.Type && len(c.AdditionalProperties) == 0 {
			m.Contents[n-1].Text += c.Text
			continue
		}
		m.Contents = append(m.Contents, c)
	}
}

func (a *aggregator) response() *model.Response {
	return &model.Response{Messages: a.msgs, ConversationID: a.convID, Usage: a.usage, FinishReason: a.finish}
}
