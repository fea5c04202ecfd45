package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
)

// The state-level operations below take the state to call with (already
// prepared by slotState) and return the state after the call. They never
// modify their arguments, so a failed call leaves the caller's data as it
// was.

type provided struct {
	raw     []json.RawMessage
	msgs    []abi.Message
	state   json.RawMessage
	changed bool
}

// provide runs the provide export. raw says whether the caller wants the
// selected history as the plugin stored it too (provided.raw): a copy of
// the history's bytes, which Provider.Provide does without.
//
// cl is the Claim of state's cached Doc (checkState), as every export below
// takes it: the Doc is found without comparing the state again.
func (p *Plugin) provide(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, cl statepatch.Claim, request []json.RawMessage, raw bool) (*provided, error) {
	r := newRequest(p.stateSize(abi.ExportProvide, state) + rawSize(request))
	p.common(r, abi.ExportProvide, facts, state)
	if len(request) > 0 {
		r.array("request_messages", request)
	}
	var res provided
	err := p.invoke(ctx, abi.ExportProvide, r.bytes(), func(ctx context.Context, out []byte) error {
		resp, err := decodeProvide(out)
		if err != nil {
			return err
		}
		next, ncl, changed, err := p.applyChange(ctx, abi.ExportProvide, state, cl, &resp.StateChange)
		if err != nil {
			return err
		}
		switch {
		case resp.FromState != nil:
			res.raw, res.msgs, err = p.selectFromState(abi.ExportProvide, next, ncl, resp.FromState, raw)
		case len(resp.Messages) > 0:
			res.raw = resp.Messages
			res.msgs, err = decodeValueMessages(ctx, &p.provided, abi.ExportProvide, "messages", resp.Messages)
		}
		if err != nil {
			return err
		}
		res.state, res.changed = next, changed
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func (p *Plugin) store(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, cl statepatch.Claim, request, response []json.RawMessage) (json.RawMessage, bool, error) {
	r := newRequest(p.stateSize(abi.ExportStore, state) + rawSize(request, response))
	p.common(r, abi.ExportStore, facts, state)
	r.array("request_messages", request)
	r.array("response_messages", response)
	return p.change(ctx, abi.ExportStore, state, cl, r.bytes())
}

func (p *Plugin) clear(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, cl statepatch.Claim) (json.RawMessage, bool, error) {
	if !p.has(abi.ExportClear) {
		return nil, false, p.unsupported(abi.ExportClear)
	}
	r := newRequest(p.stateSize(abi.ExportClear, state))
	p.common(r, abi.ExportClear, facts, state)
	next, changed, err := p.change(ctx, abi.ExportClear, state, cl, r.bytes())
	return next, changed, p.unimplemented(abi.ExportClear, err)
}

// change runs an export whose response is a state change.
func (p *Plugin) change(ctx context.Context, export string, state json.RawMessage, cl statepatch.Claim, req []byte) (next json.RawMessage, changed bool, err error) {
	err = p.invoke(ctx, export, req, func(ctx context.Context, out []byte) error {
		c, err := decodeChange(export, out)
		if err != nil {
			return err
		}
		next, _, changed, err = p.applyChange(ctx, export, state, cl, c)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return next, changed, nil
}

// list runs the list export. A plugin that lists it in omit_state gets no
// state, and may answer by reference (from_state): the host then serves the
// page from the array in the state itself, with a cursor of its own, so the
// call costs the plugin nothing and the host the page (SPEC section 4.4.1).
func (p *Plugin) list(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, cl statepatch.Claim, cursor string, limit int) ([]abi.Message, string, error) {
	if !p.has(abi.ExportList) {
		return nil, "", p.unsupported(abi.ExportList)
	}
	r := newRequest(p.stateSize(abi.ExportList, state))
	p.common(r, abi.ExportList, facts, state)
	if cursor != "" {
		r.value("cursor", cursor)
	}
	if limit > 0 {
		r.value("limit", limit)
	}
	var msgs []abi.Message
	var next string
	err := p.invoke(ctx, abi.ExportList, r.bytes(), func(ctx context.Context, out []byte) error {
		resp, err := decodeList(out)
		if err != nil {
			return err
		}
		if resp.FromState != nil {
			msgs, next, err = p.pageFromState(ctx, state, cl, resp.FromState.Pointer, cursor, limit)
			return err
		}
		msgs, err = decodeMessages(ctx, abi.ExportList, "messages", resp.Messages)
		next = resp.NextCursor
		return err
	})
	if err != nil {
		return nil, "", p.unimplemented(abi.ExportList, err)
	}
	return msgs, next, nil
}

func (p *Plugin) unsupported(export string) error {
	return &PluginError{Plugin: p.name, Export: export, Err: fmt.Errorf("%w: %s has no %s export", ErrUnsupported, p.name, export)}
}

// unimplemented turns an optional export's unimplemented answer into
// ErrUnsupported, as if the export were absent (SPEC section 4).
func (p *Plugin) unimplemented(export string, err error) error {
	if errors.Is(err, abi.ErrUnimplemented) {
		return &PluginError{Plugin: p.name, Export: export, Err: fmt.Errorf("%w: %w", ErrUnsupported, err)}
	}
	return err
}
