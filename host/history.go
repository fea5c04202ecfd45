package host

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmhist/wasmhist/host/session"
	"iter"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
)

// Provider returns the plugin as the history provider of one state key.
// Two providers of one plugin with different keys (a primary and an audit
// copy) keep separate state and never see each other's data.
//
// Every call works on the session's slot for the key: a missing slot starts
// from the plugin's initial state, an older state_version is migrated, a
// slot owned by another plugin is refused with ErrInvalidSession, and the
// state is validated against the plugin's state_schema going in and coming
// out. The session is changed only when the call succeeds.
//
// The session has value semantics (see session.Session): a call records
// its result in a new State map with new bytes and never writes into a map
// or a byte slice the session already had, so a copy of the session, by
// assignment or by Clone, and any ProviderState or Data slice read from it
// earlier, stay exactly as they were.
//
// The result is what package host/agent calls a HistoryProvider.
func (p *Plugin) Provider(stateKey string) *Provider {
	return &Provider{p: p, key: stateKey}
}

// Provider is a plugin serving the history of one state key in sessions.
// It holds no session data; one Provider serves any number of sessions.
type Provider struct {
	p   *Plugin
	key string
}

// StateKey is the provider's slot in Session.State.
func (pp *Provider) StateKey() string { return pp.key }

// Provide runs the plugin's provide export on the session's slot and
// returns the history to put before the request messages.
func (pp *Provider) Provide(ctx context.Context, s *session.Session, request []abi.Message) ([]abi.Message, error) {
	facts, state, cl, err := pp.p.session(ctx, s, pp.key)
	if err != nil {
		return nil, err
	}
	raws, err := marshalMessages(request)
	if err != nil {
		return nil, err
	}
	res, err := pp.p.provide(ctx, facts, state, cl, raws, false)
	if err != nil {
		return nil, err
	}
	pp.p.commit(s, pp.key, res.state)
	return res.msgs, nil
}

// Store runs the plugin's store export with the new messages of a run
// (or of one model call) and records the slot's new state in s.
func (pp *Provider) Store(ctx context.Context, s *session.Session, request, response []abi.Message) error {
	facts, state, cl, err := pp.p.session(ctx, s, pp.key)
	if err != nil {
		return err
	}
	req, err := marshalMessages(request)
	if err != nil {
		return err
	}
	resp, err := marshalMessages(response)
	if err != nil {
		return err
	}
	next, _, err := pp.p.store(ctx, facts, state, cl, req, resp)
	if err != nil {
		return err
	}
	pp.p.commit(s, pp.key, next)
	return nil
}

// List returns one page of what the plugin stored under the provider's
// key (see Plugin.List): what package host/agent calls a HistoryLister.
func (pp *Provider) List(ctx context.Context, s *session.Session, cursor string, limit int) ([]abi.Message, string, error) {
	return pp.p.List(ctx, s, pp.key, cursor, limit)
}

// List returns one page of what the plugin stored under key, oldest first,
// and the cursor of the next page ("" after the last). ErrUnsupported when
// the plugin has no list export.
func (p *Plugin) List(ctx context.Context, s *session.Session, key, cursor string, limit int) ([]abi.Message, string, error) {
	if !p.has(abi.ExportList) {
		return nil, "", p.unsupported(abi.ExportList)
	}
	facts, state, cl, err := p.session(ctx, s, key)
	if err != nil {
		return nil, "", err
	}
	return p.list(ctx, facts, state, cl, cursor, limit)
}

// Pages reads everything the plugin stored under key, a page of at most
// limit messages at a time, oldest first: each page with a nil error, or
// the error that ended the reading. A plugin that gives a cursor it gave
// before, whose pages would go round for ever, fails it with
// ErrInvalidOutput, as a page other than the last that holds no message
// does (List). Stop ranging to stop reading.
func (p *Plugin) Pages(ctx context.Context, s *session.Session, key string, limit int) iter.Seq2[[]abi.Message, error] {
	return func(yield func([]abi.Message, error) bool) {
		seen := map[string]bool{}
		cursor := ""
		for {
			page, next, err := p.List(ctx, s, key, cursor, limit)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(page, nil) || next == "" {
				return
			}
			if seen[next] {
				yield(nil, &PluginError{Plugin: p.name, Export: abi.ExportList,
					Err: invalidOutput(abi.ExportList, "cursor %q again: its pages would go round for ever", clip(next))})
				return
			}
			seen[next] = true
			cursor = next
		}
	}
}

// Clear forgets everything the plugin stored under key. ErrUnsupported when
// the plugin has no clear export.
func (p *Plugin) Clear(ctx context.Context, s *session.Session, key string) error {
	if !p.has(abi.ExportClear) {
		return p.unsupported(abi.ExportClear)
	}
	facts, state, cl, err := p.session(ctx, s, key)
	if err != nil {
		return err
	}
	next, _, err := p.clear(ctx, facts, state, cl)
	if err != nil {
		return err
	}
	p.commit(s, key, next)
	return nil
}

// session returns the facts and the (migrated, validated) state of a slot,
// with the Claim of its cached Doc (checkState). The state is the session's
// bytes, which the host never writes: they stay what the Claim compared
// for the whole call.
func (p *Plugin) session(ctx context.Context, s *session.Session, key string) (abi.SessionFacts, json.RawMessage, statepatch.Claim, error) {
	if s == nil {
		return abi.SessionFacts{}, nil, statepatch.Claim{}, &PluginError{Plugin: p.name, Export: "session", Err: fmt.Errorf("%w: nil session", ErrInvalidSession)}
	}
	facts := abi.SessionFacts{SessionID: s.SessionID, StateKey: key, ServiceSessionID: s.ServiceSessionID}
	var slot *session.ProviderState
	if ps, ok := s.State[key]; ok {
		slot = &ps
	}
	state, cl, err := p.slotState(ctx, facts, slot)
	if err != nil {
		if _, ok := err.(*PluginError); !ok {
			err = &PluginError{Plugin: p.name, Export: "session", Err: err}
		}
		return facts, nil, statepatch.Claim{}, err
	}
	return facts, state, cl, nil
}

// commit records a slot's state after a successful call, in a new State
// map: copies of s share the old one.
func (p *Plugin) commit(s *session.Session, key string, state json.RawMessage) {
	s.SetState(key, session.ProviderState{Provider: p.info.Name, StateVersion: p.info.StateVersion, Data: state})
}

func marshalMessages(ms []abi.Message) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(ms))
	for i := range ms {
		b, err := json.Marshal(&ms[i])
		if err != nil {
			return nil, fmt.Errorf("host: encoding message %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}
