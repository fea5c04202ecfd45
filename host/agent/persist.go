package agent

import (
	"context"
	"fmt"
	"iter"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/reducer"
)

// PersistPerServiceCall returns a model client that persists history after
// every successful call of an agent run with RequirePerServiceCallPersistence.
// The agent adds it to its client by itself; a caller whose stack is used as
// is (Config.UseClientAsIs) adds it as the innermost layer, directly
// around the client that talks to the service.
//
// Outside such a run (no run in the context, or per-run persistence) it
// passes calls through unchanged.
func PersistPerServiceCall(next model.Client) model.Client {
	return &persistingClient{next: next}
}

type persistingClient struct{ next model.Client }

// Unwrap returns the wrapped client, so that stacks can be inspected.
func (p *persistingClient) Unwrap() model.Client { return p.next }

// StoresHistoryByDefault forwards the wrapped client's answer.
func (p *persistingClient) StoresHistoryByDefault() bool { return storesByDefault(p.next) }

func (p *persistingClient) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	r := runFrom(ctx)
	if r == nil || !r.mode.perCallPersistence() {
		return p.next.Complete(ctx, req)
	}
	req, err := r.beforeCall(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := p.next.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.afterCall(ctx, resp)
}

func (p *persistingClient) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		r := runFrom(ctx)
		if r == nil || !r.mode.perCallPersistence() {
			for u, err := range p.next.Stream(ctx, req) {
				if !yield(u, err) {
					return
				}
			}
			return
		}
		req, err := r.beforeCall(ctx, req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		var agg aggregator
		for u, err := range p.next.Stream(ctx, req) {
			if err != nil {
				yield(model.Update{}, err)
				return
			}
			agg.add(u)
			if !yield(u, nil) {
				// The call was abandoned before it ended: nothing of it is
				// stored, as a service would not keep a cancelled response.
				return
			}
		}
		resp := agg.response()
		out, err := r.afterCall(ctx, resp)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		if out.ConversationID != resp.ConversationID {
			yield(model.Update{ConversationID: out.ConversationID}, nil)
		}
	}
}

// beforeCall prepares one call: it takes the sentinel off and, when the
// middleware keeps the conversation locally, puts the stored history back.
func (r *run) beforeCall(ctx context.Context, req model.Request) (model.Request, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.ConversationID == localConversationID {
		req.ConversationID = ""
	}
	if !r.sentinel() || r.switched || req.ConversationID != "" {
		return req, nil
	}
	h, err := r.loadHistory(ctx)
	if err != nil {
		return req, err
	}
	// History goes after the instructions and context messages the loop
	// put first, before the call's new messages.
	lead := 0
	for lead < len(req.Messages) {
		m := req.Messages[lead]
		if (m.Source == nil && m.Role == abi.RoleSystem) || (m.Source != nil && m.Source.Type == abi.SourceContextProvider) {
			lead++
			continue
		}
		break
	}
	msgs := append([]abi.Message(nil), req.Messages[:lead]...)
	msgs = append(msgs, reducer.StripOrphans(concat(h, req.Messages[lead:]))...)
	req.Messages = msgs
	return req, nil
}

// afterCall persists one successful call and commits the session.
func (r *run) afterCall(ctx context.Context, resp *model.Response) (*model.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := resp.ConversationID
	if id == localConversationID {
		return nil, fmt.Errorf("agent: the model client returned the local sentinel conversation id")
	}
	switch {
	case id != "" && r.sentinel() && !r.switched:
		// The service keeps the conversation although the run expected it
		// not to: from now on it does, and history is not reloaded.
		if r.a.loader >= 0 {
			if err := r.conflict(); err != nil {
				return nil, err
			}
		}
		r.switched = true
	case id == "" && r.mode.serviceKeeps():
		r.a.warnOnce("no-conversation-id",
			"agent: the service was expected to keep the conversation but returned no conversation id; the whole conversation is sent on each call and later runs cannot continue it from the service")
	}
	if id != "" {
		r.work.ServiceSessionID = id
	}
	for _, pc := range r.a.cfg.Providers {
		if err := r.storeInto(ctx, pc, r.pendingResumed, r.pendingInputs, r.pendingResults, resp.Messages); err != nil {
			return nil, err
		}
	}
	// The run's reply so far: what the run returned up to this call; the
	// loop ends after it when it asks for no tool or reaches the bound.
	r.reply = concat(r.reply, r.pendingResults, resp.Messages)
	r.finished = len(functionCalls(resp.Messages)) == 0 || r.calls+1 >= r.maxIter
	r.learn = learnable(r.pendingResumed, r.pendingInputs, r.pendingResults, resp.Messages)
	r.pendingResumed, r.pendingInputs, r.pendingResults = nil, nil, nil
	// The calls this response asks for are open until a later call
	// carries their results; the session says so, so that a run that
	// stops before then can be resumed.
	r.work.PendingToolCalls = r.a.markApprovals(openCalls(resp.Messages))
	if err := r.commit(ctx); err != nil {
		return nil, err
	}
	if id == "" && r.sentinel() && !r.switched {
		out := *resp
		out.ConversationID = localConversationID
		return &out, nil
	}
	return resp, nil
}

type unwrapper interface{ Unwrap() model.Client }

// hasPersistence reports whether a client stack contains the middleware.
func hasPersistence(c model.Client) bool {
	for c != nil {
		if _, ok := c.(*persistingClient); ok {
			return true
		}
		u, ok := c.(unwrapper)
		if !ok {
			return false
		}
		c = u.Unwrap()
	}
	return false
}

// storesByDefault reports whether the service behind a client stack keeps
// conversations when store is unset.
func storesByDefault(c model.Client) bool {
	for c != nil {
		if hs, ok := c.(model.HistoryStorer); ok {
			return hs.StoresHistoryByDefault()
		}
		u, ok := c.(unwrapper)
		if !ok {
			return false
		}
		c = u.Unwrap()
	}
	return false
}
