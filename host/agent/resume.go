package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

// ResumeHow says how a run answered a tool call an earlier run left open.
type ResumeHow string

const (
	// ResumedWithResult: the tool had run before the earlier run stopped;
	// its result, kept in the session, was sent.
	ResumedWithResult ResumeHow = "result"
	// ResumedRepeated: the tool had not (or not knowingly) finished and is
	// marked Tool.SafeToRepeat, so it ran again.
	ResumedRepeated ResumeHow = "repeated"
	// ResumedUnknown: the model was sent an error result saying the call
	// was interrupted and its result is unknown, so it can ask again.
	ResumedUnknown ResumeHow = "unknown"
	// ResumedApproved: the call awaited a person's approval, which the
	// run's RunOptions.Decisions gave; the tool ran.
	ResumedApproved ResumeHow = "approved"
	// ResumedDenied: the call awaited a person's approval, which was
	// refused; the model was sent the reason as the call's error.
	ResumedDenied ResumeHow = "denied"
)

// ResumedCall is one tool call an earlier run left unanswered
// (session.Session.PendingToolCalls) that this run answered before its
// input.
type ResumedCall struct {
	CallID string
	Name   string
	How    ResumeHow
}

// String says what happened, for a person: "tool clock (call_r1) was
// interrupted; the model was told its result is unknown".
func (c ResumedCall) String() string {
	var how string
	switch c.How {
	case ResumedApproved:
		return fmt.Sprintf("tool %s (%s) was approved; it ran and the model was sent its result", c.Name, c.CallID)
	case ResumedDenied:
		return fmt.Sprintf("tool %s (%s) was denied; the model was told why", c.Name, c.CallID)
	case ResumedWithResult:
		how = "the model was sent the result it returned"
	case ResumedRepeated:
		how = "it ran again (safe to repeat) and the model was sent the new result"
	default:
		how = "the model was told its result is unknown"
	}
	return fmt.Sprintf("tool %s (%s) was interrupted; %s", c.Name, c.CallID, how)
}

// interruptedError is the error result of a call whose result is unknown.
const interruptedError = "the call was interrupted before its result was recorded; whether it ran and what it returned are unknown. Call it again if it is still needed."

// resume answers the session's pending tool calls: with the result the
// tool returned before the earlier run stopped, by running the tool again
// when it is safe to repeat, or with an error saying the result is
// unknown. Calls the caller's input answers are left to the input; calls
// no conversation holds any more are dropped, as nothing can pair with
// them. The answers are one tool message per call, in call order, sent
// before the input.
func (r *run) resume(ctx context.Context) error {
	pending := r.work.PendingToolCalls
	if len(pending) == 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range r.input {
		for _, id := range m.ResultIDs() {
			answered[id] = true
		}
	}
	held, err := r.heldCalls(ctx)
	if err != nil {
		return err
	}
	for _, p := range pending {
		if answered[p.CallID] || (held != nil && !held[p.CallID]) {
			continue
		}
		res := abi.Content{Type: abi.ContentFunctionResult, CallID: p.CallID}
		how := ResumedUnknown
		switch t := r.a.tools[p.Name]; {
		case !p.Done && (p.AwaitsApproval || (t != nil && t.NeedsApproval)):
			var err error
			if res, how, err = r.answerApproval(ctx, p); err != nil {
				return err
			}
		case p.Done:
			res.Result, res.Error, how = p.Result, p.Error, ResumedWithResult
		case t != nil && t.SafeToRepeat:
			res = r.a.runTool(ctx, abi.Content{Type: abi.ContentFunctionCall, CallID: p.CallID, Name: p.Name, Arguments: p.Arguments})
			how = ResumedRepeated
			r.computed[p.CallID] = res
		default:
			res.Error = interruptedError
		}
		r.resumed = append(r.resumed, abi.Message{Role: abi.RoleTool, Contents: []abi.Content{res}})
		r.resumedCalls = append(r.resumedCalls, ResumedCall{CallID: p.CallID, Name: p.Name, How: how})
	}
	r.pendingResumed = r.resumed
	return nil
}

// heldCalls returns the call ids of the history the model will be sent,
// or nil when the service holds the conversation (it holds every call of
// the response the session continues).
func (r *run) heldCalls(ctx context.Context) (map[string]bool, error) {
	if r.work.ServiceSessionID != "" {
		return nil, nil
	}
	h := r.history
	if r.mode.load != loadOnce && r.a.loader >= 0 {
		var err error
		if h, err = r.loadHistory(ctx); err != nil {
			return nil, err
		}
	}
	held := map[string]bool{}
	for _, m := range h {
		for _, id := range m.CallIDs() {
			held[id] = true
		}
	}
	return held, nil
}

// openCalls returns the pending calls a committed response leaves: its
// function calls, none answered yet.
func openCalls(msgs []abi.Message) []session.PendingToolCall {
	var out []session.PendingToolCall
	for _, c := range functionCalls(msgs) {
		out = append(out, session.PendingToolCall{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments})
	}
	return out
}

// trailingCalls returns the calls of the last model response among msgs,
// with the results its tools returned after it: no model was sent those.
func trailingCalls(msgs []abi.Message) []session.PendingToolCall {
	last := lastResponse(msgs)
	if last < 0 {
		return nil
	}
	calls := openCalls(msgs[last : last+1])
	results := map[string]abi.Content{}
	for _, m := range msgs[last+1:] {
		for _, c := range m.Contents {
			if c.Type == abi.ContentFunctionResult {
				results[c.CallID] = c
			}
		}
	}
	for i := range calls {
		if res, ok := results[calls[i].CallID]; ok {
			calls[i].Done, calls[i].Result, calls[i].Error = true, res.Result, res.Error
		}
	}
	return calls
}

// lastResponse returns the index of the last model response among msgs,
// or -1.
func lastResponse(msgs []abi.Message) int {
	last := -1
	for i, m := range msgs {
		if m.Role == abi.RoleAssistant {
			last = i
		}
	}
	return last
}

// recordComputed fills in the pending calls of the working session with
// the results this run computed for them, and reports whether any
// changed: those results are what happened, and the next run sends them
// rather than guessing. r.mu must be held.
func (r *run) recordComputed() bool {
	changed := false
	var next []session.PendingToolCall
	for i, p := range r.work.PendingToolCalls {
		res, ok := r.computed[p.CallID]
		if p.Done || !ok {
			continue
		}
		if next == nil {
			next = slices.Clone(r.work.PendingToolCalls)
		}
		next[i].Done, next[i].Result, next[i].Error = true, res.Result, res.Error
		changed = true
	}
	if changed {
		r.work.PendingToolCalls = next
	}
	return changed
}

// commitFailure, for a run that persists per call and failed, commits the
// results its tools returned for calls the last committed response left
// open, so the next run sends them. It returns err, joined with a failed
// commit's error.
func (r *run) commitFailure(ctx context.Context, err error) error {
	if !r.mode.perCallPersistence() || r.mode.store != storeEveryCall {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recordComputed() {
		return err
	}
	if cerr := r.commit(ctx); cerr != nil {
		return fmt.Errorf("%w; and recording the tool results: %w", err, cerr)
	}
	return err
}
