package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

// ErrApprovalRequired reports a run on a session whose tool calls await a
// person's decision (PendingApprovals) without a decision for each in
// RunOptions.Decisions. Nothing ran and nothing changed.
var ErrApprovalRequired = errors.New("agent: tool calls await approval")

// ApprovalRequest is a tool call a run ended on because its tool needs a
// person's approval (Tool.NeedsApproval). The session records it among its
// pending tool calls (session.PendingToolCall.AwaitsApproval) until a run
// carries the decision.
type ApprovalRequest struct {
	CallID    string
	Name      string
	Arguments json.RawMessage
}

// String says what is asked, for a person: `clock {"timezone":"UTC"}`.
func (q ApprovalRequest) String() string {
	args := strings.TrimSpace(string(q.Arguments))
	if args == "" {
		args = "{}"
	}
	return q.Name + " " + args
}

// Decision is a person's answer to an ApprovalRequest, carried by the next
// run (RunOptions.Decisions). Approve runs the tool and sends the model its
// result; otherwise the model is sent an error result with Reason.
type Decision struct {
	CallID  string
	Approve bool
	// Reason, for a denial, tells the model why (sent as the call's error).
	Reason string
}

// Approve returns the decision to run the call callID.
func Approve(callID string) Decision { return Decision{CallID: callID, Approve: true} }

// Deny returns the decision not to run the call callID, telling the model
// why.
func Deny(callID, reason string) Decision { return Decision{CallID: callID, Reason: reason} }

// PendingApprovals returns the tool calls of s that await a person's
// decision, in call order: what a caller asks about before the next run
// (after a restart too, as the session records them).
func PendingApprovals(s *session.Session) []ApprovalRequest {
	var out []ApprovalRequest
	for _, p := range s.PendingToolCalls {
		if p.AwaitsApproval && !p.Done {
			out = append(out, ApprovalRequest{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments})
		}
	}
	return out
}

// deniedError is the error result a denied call is answered with.
func deniedError(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return "the user denied this call"
	}
	return "the user denied this call: " + reason
}

// needsApproval reports whether a call must wait for a person's decision.
func (a *Agent) needsApproval(name string) bool {
	t := a.tools[name]
	return t != nil && t.NeedsApproval
}

// splitApprovals separates the calls of one response whose tools need
// approval from the others, each in call order.
func (a *Agent) splitApprovals(calls []abi.Content) (run, ask []abi.Content) {
	for _, c := range calls {
		if a.needsApproval(c.Name) {
			ask = append(ask, c)
		} else {
			run = append(run, c)
		}
	}
	return run, ask
}

// markApprovals flags the open calls whose tools need approval, so that
// the session says, as data, which calls wait for a person. It returns a
// new slice when it changes one (a session's slices are never written
// into).
func (a *Agent) markApprovals(calls []session.PendingToolCall) []session.PendingToolCall {
	var out []session.PendingToolCall
	for i, p := range calls {
		if p.Done || p.AwaitsApproval || !a.needsApproval(p.Name) {
			continue
		}
		if out == nil {
			out = slices.Clone(calls)
		}
		out[i].AwaitsApproval = true
	}
	if out == nil {
		return calls
	}
	return out
}

// decisions indexes the run's decisions by call id, refusing one that
// names no call of the session awaiting approval (a stale or mistyped
// answer would otherwise be dropped silently) and a call decided twice.
func decisions(s *session.Session, ds []Decision) (map[string]Decision, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	awaiting := map[string]bool{}
	for _, p := range PendingApprovals(s) {
		awaiting[p.CallID] = true
	}
	out := make(map[string]Decision, len(ds))
	for _, d := range ds {
		if !awaiting[d.CallID] {
			return nil, fmt.Errorf("agent: run: %w: a decision for call %q, which awaits no approval in session %q; ask again with agent.PendingApprovals", ErrConfig, d.CallID, s.SessionID)
		}
		if _, dup := out[d.CallID]; dup {
			return nil, fmt.Errorf("agent: run: %w: two decisions for call %q", ErrConfig, d.CallID)
		}
		out[d.CallID] = d
	}
	return out, nil
}

// answerApproval answers an open call that awaits approval with the
// person's decision: the tool's result when approved, an error result
// with the reason when denied. Without a decision the run is refused.
func (r *run) answerApproval(ctx context.Context, p session.PendingToolCall) (abi.Content, ResumeHow, error) {
	d, ok := r.decisions[p.CallID]
	if !ok {
		return abi.Content{}, "", fmt.Errorf("agent: run: %w: tool %s (call %s) waits for a person's decision: pass RunOptions.Decisions with agent.Approve or agent.Deny",
			ErrApprovalRequired, ApprovalRequest{Name: p.Name, Arguments: p.Arguments}, p.CallID)
	}
	if !d.Approve {
		return abi.Content{Type: abi.ContentFunctionResult, CallID: p.CallID, Error: deniedError(d.Reason)}, ResumedDenied, nil
	}
	res := r.a.runTool(ctx, abi.Content{Type: abi.ContentFunctionCall, CallID: p.CallID, Name: p.Name, Arguments: p.Arguments})
	r.computed[p.CallID] = res
	return res, ResumedApproved, nil
}

// awaitApproval ends the loop on a response whose calls ask include tools
// that need approval: the calls run (the others of the response) go ahead,
// their results returned and recorded, and the run reports the requests.
// finish records every call of the response as open, the requests marked.
func (r *run) awaitApproval(ctx context.Context, res *RunResult, run, ask []abi.Content) {
	if len(run) > 0 {
		results, _ := r.a.runTools(ctx, run)
		r.keepResults(res, results)
	}
	for _, c := range ask {
		res.ApprovalRequests = append(res.ApprovalRequests, ApprovalRequest{CallID: c.CallID, Name: c.Name, Arguments: c.Arguments})
	}
	r.awaiting = true
}
