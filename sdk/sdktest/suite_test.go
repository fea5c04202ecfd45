package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// The suite is tested against providers run through sdk.Handler by
// handlerSubject, a small stand-in for the host: correct providers must pass
// every case, and for every case a provider with a realistic bug must fail
// it, or the case proves nothing.

// handlerSubject applies state changes and resolves state selections the way
// the host does, for what these tests need: whole states, appends, and
// selections without a window.
type handlerSubject struct {
	h    abi.Handler
	info abi.PluginInfo
}

func newHandlerSubject(ctx context.Context, h abi.Handler) (*handlerSubject, error) {
	out, err := h(ctx, abi.ExportDescribe, nil)
	if err != nil {
		return nil, err
	}
	s := &handlerSubject{h: h}
	return s, json.Unmarshal(out, &s.info)
}

func (s *handlerSubject) Info() abi.PluginInfo { return s.info }

func (s *handlerSubject) InitialState() json.RawMessage {
	if len(s.info.InitialState) == 0 {
		return json.RawMessage(`{}`)
	}
	return s.info.InitialState
}

func (s *handlerSubject) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	return s.h(ctx, export, input)
}

// request encodes an export's request. The state goes in byte for byte, as
// the host sends it: re-encoding it here would hide a provider that depends
// on the state's exact bytes.
func (s *handlerSubject) request(export string, facts abi.SessionFacts, state json.RawMessage, fields map[string]any) []byte {
	fields["session"] = facts
	b := mustJSON(fields)
	if slices.Contains(s.info.OmitState, export) {
		return b
	}
	return slices.Concat([]byte(`{"state":`), state, []byte(","), b[1:])
}

func (s *handlerSubject) ProvideState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request []json.RawMessage) ([]json.RawMessage, json.RawMessage, error) {
	out, err := s.h(ctx, abi.ExportProvide, s.request(abi.ExportProvide, facts, state, map[string]any{"request_messages": request}))
	if err != nil {
		return nil, nil, err
	}
	var resp abi.ProvideResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, nil, err
	}
	next, err := applyChange(state, resp.StateChange)
	if err != nil {
		return nil, nil, err
	}
	if resp.FromState == nil {
		return resp.Messages, next, nil
	}
	if resp.FromState.Window != nil {
		return nil, nil, errors.New("handlerSubject: windows are not supported")
	}
	var msgs []json.RawMessage
	if err := lookup(next, resp.FromState.Pointer, &msgs); err != nil {
		return nil, nil, err
	}
	return msgs, next, nil
}

func (s *handlerSubject) StoreState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request, response []json.RawMessage) (json.RawMessage, error) {
	out, err := s.h(ctx, abi.ExportStore, s.request(abi.ExportStore, facts, state, map[string]any{"request_messages": request, "response_messages": response}))
	if err != nil {
		return nil, err
	}
	var resp abi.StoreResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, err
	}
	return applyChange(state, resp.StateChange)
}

func lookup(state json.RawMessage, pointer string, v any) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(state, &doc); err != nil {
		return err
	}
	key := strings.TrimPrefix(pointer, "/")
	if strings.Contains(key, "/") {
		return fmt.Errorf("handlerSubject: unsupported pointer %q", pointer)
	}
	return json.Unmarshal(doc[key], v)
}

func factoryOf(newProvider func() sdk.Provider) Factory {
	return func(ctx context.Context) (Subject, error) {
		return newHandlerSubject(ctx, sdk.Handler(newProvider()))
	}
}

type historyState struct {
	Messages []json.RawMessage `json:"messages"`
}

var historySchema = json.RawMessage(`{"type":"object","required":["messages"],"properties":{"messages":{"type":"array"}}}`)

// valueProvider keeps history in its state and answers by value with whole
// states: correct, and the opposite style to appendProvider.
type valueProvider struct{}

func (valueProvider) Describe() abi.PluginInfo {
	return abi.PluginInfo{Name: "value", Version: "1", StateVersion: 1, StateSchema: historySchema, InitialState: json.RawMessage(`{"messages":[]}`)}
}

func (valueProvider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	st, err := sdk.DecodeState[historyState](req.State)
	if err != nil {
		return nil, err
	}
	return &abi.ProvideResponse{Messages: st.Messages}, nil
}

func (valueProvider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	st, err := sdk.DecodeState[historyState](req.State)
	if err != nil {
		return nil, err
	}
	st.Messages = slices.Concat(st.Messages, req.RequestMessages, req.ResponseMessages)
	state, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{State: state}}, nil
}

// appendProvider is the inmemory plugin's design: no state in requests,
// appends, and a selection by reference.
type appendProvider struct{}

func (appendProvider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name: "append", Version: "1", StateVersion: 1, StateSchema: historySchema,
		InitialState: json.RawMessage(`{"messages":[]}`), OmitState: []string{abi.ExportProvide, abi.ExportStore},
	}
}

func (appendProvider) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{FromState: &abi.StateSelection{Pointer: "/messages"}}, nil
}

func (appendProvider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", slices.Concat(req.RequestMessages, req.ResponseMessages))}}, nil
}

// The broken providers. Each has a bug seen in real storage code.

// responseFirst stores a run's response before its request.
type responseFirst struct{ appendProvider }

func (responseFirst) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", slices.Concat(req.ResponseMessages, req.RequestMessages))}}, nil
}

// byteSplicer appends to its state by editing the bytes it was given,
// assuming they are exactly what it wrote.
type byteSplicer struct{ valueProvider }

func (byteSplicer) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	state := bytes.Clone(req.State)
	const tail = "]}"
	if !bytes.HasSuffix(state, []byte(tail)) {
		return nil, abi.Errorf(abi.CodeFailedPrecondition, "state %q is not one I wrote", state)
	}
	body := state[:len(state)-len(tail)]
	for _, m := range slices.Concat(req.RequestMessages, req.ResponseMessages) {
		if !bytes.HasSuffix(body, []byte("[")) {
			body = append(body, ',')
		}
		body = append(body, m...)
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{State: append(body, tail...)}}, nil
}

// sessionStore keeps history outside the state, keyed by the session id
// alone, as a database table with the wrong key would.
type sessionStore struct {
	appendProvider
	mu   *sync.Mutex
	rows map[string][]json.RawMessage
}

func (p sessionStore) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &abi.ProvideResponse{Messages: slices.Clone(p.rows[req.Session.SessionID])}, nil
}

func (p sessionStore) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := req.Session.SessionID
	p.rows[id] = slices.Concat(p.rows[id], req.RequestMessages, req.ResponseMessages)
	return &abi.StoreResponse{}, nil
}

// instanceCache remembers history in the instance that stored it.
type instanceCache struct {
	appendProvider
	rows map[abi.SessionFacts][]json.RawMessage
}

func (p *instanceCache) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{Messages: slices.Clone(p.rows[req.Session])}, nil
}

func (p *instanceCache) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	p.rows[req.Session] = slices.Concat(p.rows[req.Session], req.RequestMessages, req.ResponseMessages)
	return &abi.StoreResponse{}, nil
}

// typedMessages decodes messages into abi.Message and encodes them again,
// dropping what that type does not know.
type typedMessages struct{ appendProvider }

func (typedMessages) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	var msgs []json.RawMessage
	for _, raw := range slices.Concat(req.RequestMessages, req.ResponseMessages) {
		var m abi.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		msgs = append(msgs, mustJSON(m))
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", msgs)}}, nil
}

// noInitialState declares no initial state and fails on a state it has not
// written yet.
type noInitialState struct{ valueProvider }

func (noInitialState) Describe() abi.PluginInfo {
	info := valueProvider{}.Describe()
	info.InitialState = nil
	return info
}

func (noInitialState) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	var st struct {
		Messages *[]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(req.State, &st); err != nil {
		return nil, err
	}
	if st.Messages == nil {
		return nil, abi.Errorf(abi.CodeFailedPrecondition, "the state has no messages")
	}
	return &abi.ProvideResponse{Messages: *st.Messages}, nil
}

// futureABI claims an ABI major this host does not speak.
type futureABI struct{ appendProvider }

func (futureABI) Describe() abi.PluginInfo {
	info := appendProvider{}.Describe()
	info.ABI = strconv.Itoa(abi.Major+1) + ".0"
	return info
}

// codeless answers like a hand-written handler that reports every failure
// as an internal error.
func codeless(h abi.Handler) abi.Handler {
	return func(ctx context.Context, export string, input []byte) ([]byte, error) {
		out, err := h(ctx, export, input)
		if err != nil {
			return nil, abi.Errorf(abi.CodeInternal, "%s failed: %s", export, err.Error())
		}
		return out, nil
	}
}

// pagedProvider is appendProvider with list (the cursor is an index) and
// clear (a patch emptying the array): correct.
type pagedProvider struct{ appendProvider }

func (pagedProvider) List(_ context.Context, req *abi.ListRequest) (*abi.ListResponse, error) {
	st, err := sdk.DecodeState[historyState](req.State)
	if err != nil {
		return nil, err
	}
	start := 0
	if req.Cursor != "" {
		if start, err = strconv.Atoi(req.Cursor); err != nil || start < 0 {
			return nil, abi.Errorf(abi.CodeInvalidArgument, "cursor %q", req.Cursor)
		}
		start = min(start, len(st.Messages))
	}
	limit := req.Limit
	if limit == 0 {
		limit = 4
	}
	end := min(start+limit, len(st.Messages))
	resp := &abi.ListResponse{Messages: st.Messages[start:end]}
	if end < len(st.Messages) {
		resp.NextCursor = strconv.Itoa(end)
	}
	return resp, nil
}

func (pagedProvider) Clear(context.Context, *abi.ClearRequest) (*abi.ClearResponse, error) {
	return &abi.ClearResponse{StateChange: abi.StateChange{Patch: []abi.PatchOp{{Op: abi.PatchReplace, Path: "/messages", Value: json.RawMessage(`[]`)}}}}, nil
}

// migratingProvider is pagedProvider at state version 2, whose version 1
// kept the messages under "history": correct.
type migratingProvider struct{ pagedProvider }

func (migratingProvider) Describe() abi.PluginInfo {
	info := appendProvider{}.Describe()
	info.StateVersion = 2
	return info
}

func (migratingProvider) MigrateState(_ context.Context, req *abi.MigrateStateRequest) (*abi.MigrateStateResponse, error) {
	var v1 struct {
		History []json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal(req.State, &v1); err != nil {
		return nil, err
	}
	return &abi.MigrateStateResponse{State: mustJSON(historyState{Messages: slices.Concat([]json.RawMessage{}, v1.History)})}, nil
}

// olderStates is a version 1 state of migratingProvider.
var olderStates = Options{OlderStates: []OlderState{{
	Version:  1,
	State:    mustJSON(map[string]any{"history": stored(script("v1", 2))}),
	Messages: stored(script("v1", 2)),
}}}

// emptyLister lists nothing, whatever it stored.
type emptyLister struct{ pagedProvider }

func (emptyLister) List(context.Context, *abi.ListRequest) (*abi.ListResponse, error) {
	return &abi.ListResponse{}, nil
}

// stuckCursor ignores the cursor: every call is the first page.
type stuckCursor struct{ pagedProvider }

func (p stuckCursor) List(ctx context.Context, req *abi.ListRequest) (*abi.ListResponse, error) {
	req.Cursor = ""
	return p.pagedProvider.List(ctx, req)
}

// noopClearer answers clear without clearing anything.
type noopClearer struct{ pagedProvider }

func (noopClearer) Clear(context.Context, *abi.ClearRequest) (*abi.ClearResponse, error) {
	return &abi.ClearResponse{}, nil
}

// strictCursor refuses a cursor past the end of the history, as one
// issued before a clear is.
type strictCursor struct{ pagedProvider }

func (p strictCursor) List(ctx context.Context, req *abi.ListRequest) (*abi.ListResponse, error) {
	st, err := sdk.DecodeState[historyState](req.State)
	if err != nil {
		return nil, err
	}
	if n, err := strconv.Atoi(req.Cursor); err == nil && n > len(st.Messages) {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "cursor %q past the end", req.Cursor)
	}
	return p.pagedProvider.List(ctx, req)
}

// lossyMigrator upgrades an older state to an empty history.
type lossyMigrator struct{ migratingProvider }

func (lossyMigrator) MigrateState(context.Context, *abi.MigrateStateRequest) (*abi.MigrateStateResponse, error) {
	return &abi.MigrateStateResponse{State: json.RawMessage(`{"messages":[]}`)}, nil
}

func TestSuitePassesCorrectProviders(t *testing.T) {
	t.Run("by value", func(t *testing.T) { Run(t, factoryOf(func() sdk.Provider { return valueProvider{} })) })
	t.Run("by reference", func(t *testing.T) { Run(t, factoryOf(func() sdk.Provider { return appendProvider{} })) })
	t.Run("with list and clear", func(t *testing.T) { Run(t, factoryOf(func() sdk.Provider { return pagedProvider{} })) })
	t.Run("in a database, in runs", func(t *testing.T) {
		Run(t, dbFactory(func(db *fakeDB) sdk.Provider { return dbProvider{db} }))
	})
	t.Run("with migrate_state", func(t *testing.T) {
		RunWith(t, factoryOf(func() sdk.Provider { return migratingProvider{} }), olderStates)
	})
}

// TestOptionalCasesSkip: a provider without an optional export skips its
// case, saying so, and a provider with it runs the case.
func TestOptionalCasesSkip(t *testing.T) {
	optional := []string{"list_returns_stored_in_order", "list_cursor_advances_and_ends", "clear_forgets_history", "migrate_state_serves_result"}
	// The failure cases need a RunSubject, which a plain handlerSubject is not.
	failure := []string{"rolled_back_run_leaves_nothing", "retried_run_stores_once", "two_instances_one_history", "readable_after_crashed_instance"}
	run := func(p sdk.Provider, opts Options) map[string]error {
		got := map[string]error{}
		for _, c := range CasesWith(opts) {
			got[c.Name] = c.Run(t.Context(), factoryOf(func() sdk.Provider { return p }))
		}
		return got
	}
	for name, err := range run(appendProvider{}, olderStates) {
		why, skipped := IsSkipped(err)
		if slices.Contains(failure, name) {
			assert.True(t, skipped, "case %s on a subject without runs: %v", name, err)
			assert.Equal(t, SkipNoRuns, why, "case %s", name)
		} else if slices.Contains(optional, name) {
			assert.True(t, skipped, "case %s on a provider without the export: %v", name, err)
			assert.Equal(t, SkipNotImplemented, why, "case %s", name)
			var s *Skipped
			require.ErrorAs(t, err, &s)
			assert.Equal(t, name, s.Case)
		} else {
			assert.NoError(t, err, "case %s", name)
		}
	}
	for name, err := range run(migratingProvider{}, olderStates) {
		if _, skipped := IsSkipped(err); !slices.Contains(failure, name) || !skipped {
			assert.NoError(t, err, "case %s on a provider with every export", name)
		}
	}
	why, skipped := IsSkipped(run(migratingProvider{}, Options{})["migrate_state_serves_result"])
	assert.True(t, skipped, "migrate_state without an older state")
	assert.Contains(t, why, "no state of an older state_version")
}

func TestEveryCaseCanFail(t *testing.T) {
	shared := sessionStore{mu: new(sync.Mutex), rows: map[string][]json.RawMessage{}}
	broken := []struct {
		name   string
		fails  string // the case that must catch the bug
		reason Reason // and the reason it must give
		f      Factory
	}{
		{"claims a future ABI major", "describe", ReasonABIMajor, factoryOf(func() sdk.Provider { return futureABI{} })},
		{"fails on a state it has not written", "empty_state_initialised", ReasonInitialStateRejected, factoryOf(func() sdk.Provider { return noInitialState{} })},
		{"stores the response before the request", "provide_returns_stored_in_order", ReasonWrongHistory, factoryOf(func() sdk.Provider { return responseFirst{} })},
		{"edits the state's bytes", "state_round_trips_through_json", ReasonReencodedStateDiffers, factoryOf(func() sdk.Provider { return byteSplicer{} })},
		{"keys storage by session id alone", "state_keys_isolated", ReasonKeysMixed, factoryOf(func() sdk.Provider { return shared })},
		{"drops unknown message fields", "unknown_fields_tolerated", ReasonUnknownFieldsDropped, factoryOf(func() sdk.Provider { return typedMessages{} })},
		{"remembers history in the instance", "stateless_across_instances", ReasonInstanceDependent, factoryOf(func() sdk.Provider {
			return &instanceCache{rows: map[abi.SessionFacts][]json.RawMessage{}}
		})},
		{"reports malformed requests as internal errors", "malformed_requests_rejected", ReasonMalformedAccepted, func(ctx context.Context) (Subject, error) {
			return newHandlerSubject(ctx, codeless(sdk.Handler(appendProvider{})))
		}},
		{"lists an empty page whatever it stored", "list_returns_stored_in_order", ReasonListIncomplete, factoryOf(func() sdk.Provider { return emptyLister{} })},
		{"never advances the list cursor", "list_cursor_advances_and_ends", ReasonCursorStuck, factoryOf(func() sdk.Provider { return stuckCursor{} })},
		{"clears nothing", "clear_forgets_history", ReasonHistoryAfterClear, factoryOf(func() sdk.Provider { return noopClearer{} })},
		{"refuses a cursor issued before a clear", "clear_forgets_history", ReasonStaleCursor, factoryOf(func() sdk.Provider { return strictCursor{} })},
		{"migrates to an empty history", "migrate_state_serves_result", ReasonMigratedHistoryWrong, factoryOf(func() sdk.Provider { return lossyMigrator{} })},
		{"caches rows across calls, so a rolled-back run's rows stay", "rolled_back_run_leaves_nothing", ReasonRolledBackKept, dbFactory(newRowCache)},
		{"commits its rows itself, so a retried run stores twice", "retried_run_stores_once", ReasonRetryDuplicated, dbFactory(func(db *fakeDB) sdk.Provider { return selfCommitter{dbProvider{db}} })},
		{"caches rows across calls, so another instance's stores are missed", "two_instances_one_history", ReasonInstanceDependent, dbFactory(newRowCache)},
		{"keeps stores in its instance and writes them at its next store", "readable_after_crashed_instance", ReasonCrashLost, dbFactory(newWriteBehind)},
		{"commits a store's request messages itself, before its response", "readable_after_crashed_instance", ReasonCrashHalfWritten, dbFactory(func(db *fakeDB) sdk.Provider { return halfCommitter{dbProvider{db}} })},
		{"keeps only system and user messages of request_messages", "import_pages_read_back", ReasonImportDiffers, factoryOf(func() sdk.Provider { return inputOnly{} })},
		{"refuses assistant and tool messages in request_messages", "import_pages_read_back", ReasonImportRefused, factoryOf(func() sdk.Provider { return inputRefuser{} })},
		{"strips each store's unpaired tool calls and results", "store_keeps_split_pairs", ReasonSplitPairAltered, factoryOf(func() sdk.Provider { return orphanStripper{} })},
		{"refuses a store whose tool calls and results do not pair up", "store_keeps_split_pairs", ReasonSplitPairRefused, factoryOf(func() sdk.Provider { return pairChecker{} })},
	}
	cases := map[string]Case{}
	for _, c := range CasesWith(olderStates) {
		cases[c.Name] = c
	}
	caught := map[string]bool{}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			c, ok := cases[b.fails]
			require.True(t, ok, "no case %q", b.fails)
			require.Contains(t, c.Reasons, b.reason, "case %s does not document reason %s", b.fails, b.reason)
			err := c.Run(t.Context(), b.f)
			require.Error(t, err, "case %s passed a provider that %s", b.fails, b.name)
			t.Logf("%v", err)
			var failure *Failure
			require.ErrorAs(t, err, &failure, "case %s did not fail with a *Failure", b.fails)
			assert.Equal(t, b.fails, failure.Case, "the failure names another case")
			assert.Equal(t, b.reason, failure.Reason, "case %s failed for another reason than the bug: %v", b.fails, err)
			caught[b.fails] = true
		})
	}
	for name := range cases {
		assert.True(t, caught[name], "no broken provider shows that case %s can fail", name)
	}
}

// keepLastFive is the quickstart's natural first edit: store keeps the
// newest five messages by reading the state, while store is still listed
// in omit_state, so the request carries no state.
type keepLastFive struct{ appendProvider }

func (keepLastFive) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	st, err := sdk.DecodeState[historyState](req.State)
	if err != nil {
		return nil, err
	}
	st.Messages = slices.Concat(st.Messages, req.RequestMessages, req.ResponseMessages)
	st.Messages = st.Messages[max(0, len(st.Messages)-5):]
	return &abi.StoreResponse{StateChange: abi.StateChange{State: mustJSON(st)}}, nil
}

// TestReadingAnOmittedStateFailsNamingOmitState: the store fails, rather
// than replacing the history with the newest turn, and the failure tells
// the author about omit_state.
func TestReadingAnOmittedStateFailsNamingOmitState(t *testing.T) {
	for _, c := range Cases() {
		if c.Name != "provide_returns_stored_in_order" {
			continue
		}
		err := c.Run(t.Context(), factoryOf(func() sdk.Provider { return keepLastFive{} }))
		var failure *Failure
		require.ErrorAs(t, err, &failure)
		assert.Equal(t, ReasonCallFailed, failure.Reason, "%v", err)
		assert.Contains(t, err.Error(), "omit_state")
		return
	}
	t.Fatal("no case provide_returns_stored_in_order")
}

// countingSubject counts the messages stored in each session slot,
// whichever way the suite stores them.
type countingSubject struct {
	Subject
	mu     *sync.Mutex
	stored map[string]int
}

func (c countingSubject) add(facts abi.SessionFacts, n int) {
	c.mu.Lock()
	c.stored[facts.SessionID+"\x00"+facts.StateKey] += n
	c.mu.Unlock()
}

func (c countingSubject) StoreState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request, response []json.RawMessage) (json.RawMessage, error) {
	c.add(facts, len(request)+len(response))
	return c.Subject.StoreState(ctx, facts, state, request, response)
}

func (c countingSubject) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	if export == abi.ExportStore {
		var req abi.StoreRequest
		if json.Unmarshal(input, &req) == nil {
			c.add(req.Session, len(req.RequestMessages)+len(req.ResponseMessages))
		}
	}
	return c.Subject.Call(ctx, export, input)
}

// TestSuiteStaysWithinMaxMessagesPerSession: no case stores more than
// MaxMessagesPerSession messages in one session slot, so a plugin bounded
// by that much passes (abi/SPEC.md section 10.1).
func TestSuiteStaysWithinMaxMessagesPerSession(t *testing.T) {
	mu := &sync.Mutex{}
	stored := map[string]int{}
	inner := factoryOf(func() sdk.Provider { return pagedProvider{} })
	f := func(ctx context.Context) (Subject, error) {
		s, err := inner(ctx)
		if err != nil {
			return nil, err
		}
		return countingSubject{Subject: s, mu: mu, stored: stored}, nil
	}
	Run(t, f)
	most := 0
	for _, n := range stored {
		most = max(most, n)
	}
	t.Logf("the most messages stored in one slot: %d", most)
	require.NotEmpty(t, stored, "the count saw no store")
	assert.LessOrEqual(t, most, MaxMessagesPerSession)
}

// declaring is a provider that declares ABI version abi in describe.
type declaring struct {
	strictCursor
	abi string
}

func (p declaring) Describe() abi.PluginInfo {
	info := p.strictCursor.Describe()
	info.ABI = p.abi
	return info
}

// TestJudgedByDeclaredMinor: a plugin that refuses a cursor issued before
// clear with invalid_argument passes clear_forgets_history with advice when
// it declares ABI 1.0, and fails it when it declares 1.1 or later, whose
// rule that is.
func TestJudgedByDeclaredMinor(t *testing.T) {
	var clear Case
	for _, c := range Cases() {
		if c.Name == "clear_forgets_history" {
			clear = c
		}
	}
	require.NotNil(t, clear.Run)
	require.Equal(t, 1, ReasonStaleCursor.Since())
	tests := []struct {
		name   string
		abi    string
		advice bool
	}{
		{"1.0 plugin", "1.0", true},
		{"1.1 plugin", "1.1", false},
		{"1.2 plugin", "1.2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := factoryOf(func() sdk.Provider { return declaring{abi: tt.abi} })
			v := clear.Judge(t.Context(), f)
			assert.Equal(t, tt.abi, v.Declared)
			if tt.advice {
				require.NoError(t, v.Err, "a 1.0 plugin is not judged by a rule of 1.1")
				require.Len(t, v.Advice, 1)
				a := v.Advice[0]
				assert.Equal(t, ReasonStaleCursor, a.Reason)
				assert.Equal(t, "clear_forgets_history", a.Case)
				assert.Equal(t, 1, a.Since)
				assert.Equal(t, 0, a.Declared)
				assert.Contains(t, a.Error(), "would fail rule stale_cursor_not_empty_last_page of 1.1 (this plugin declares 1.0)")
				assert.ErrorIs(t, a, abi.ErrInvalidArgument)
				// Run, which knows nothing of advice, passes it too.
				assert.NoError(t, clear.Run(t.Context(), f))
				return
			}
			var failure *Failure
			require.ErrorAs(t, v.Err, &failure)
			assert.Equal(t, ReasonStaleCursor, failure.Reason)
			assert.Empty(t, v.Advice)
		})
	}
	// The same plugin that answers the stale cursor with an empty last page
	// gets no advice at 1.0.
	v := clear.Judge(t.Context(), factoryOf(func() sdk.Provider { return pagedProvider{} }))
	assert.NoError(t, v.Err)
	assert.Empty(t, v.Advice)
}

// TestCaseOfALaterMinorAdvises: every failure of a case introduced by a
// later minor than the plugin's is advice; a plugin of that minor fails it.
func TestCaseOfALaterMinorAdvises(t *testing.T) {
	later := judging(Case{Name: "later", Since: 2, Run: func(ctx context.Context, f Factory) error {
		if _, err := newSubject(ctx, f); err != nil {
			return err
		}
		return failf(ReasonWrongHistory, "something a 1.2 plugin must not do")
	}})
	for _, tt := range []struct {
		abi  string
		fail bool
	}{{"1.0", false}, {"1.1", false}, {"1.2", true}} {
		t.Run(tt.abi, func(t *testing.T) {
			v := later.Judge(t.Context(), factoryOf(func() sdk.Provider { return declaring{abi: tt.abi} }))
			if tt.fail {
				var failure *Failure
				require.ErrorAs(t, v.Err, &failure)
				assert.Equal(t, ReasonWrongHistory, failure.Reason)
				assert.Empty(t, v.Advice)
				return
			}
			require.NoError(t, v.Err)
			require.Len(t, v.Advice, 1)
			assert.Equal(t, 2, v.Advice[0].Since, "a rule of minor 0 in a case of minor 2 is of minor 2")
		})
	}
}

// TestEveryRuleNamesItsMinor: every case and every reason a case documents
// carries a minor this ABI has.
func TestEveryRuleNamesItsMinor(t *testing.T) {
	for _, c := range CasesWith(olderStates) {
		assert.LessOrEqual(t, c.Since, abi.Minor, "case %s", c.Name)
		for _, r := range append([]Reason{ReasonLoadFailed, ReasonCallFailed}, c.Reasons...) {
			since, ok := reasonSince[r]
			assert.True(t, ok, "reason %s of case %s names no minor (reasonSince)", r, c.Name)
			assert.LessOrEqual(t, since, abi.Minor, "reason %s", r)
		}
	}
}

// utf16Output writes its output as a kit that measures strings in UTF-16
// code units does (the Extism AssemblyScript kit's Host.outputString, SPEC
// section 11.2): the output is cut at the string's UTF-16 length, which is
// shorter than its UTF-8 bytes as soon as it holds non-ASCII text.
func utf16Output(h abi.Handler) abi.Handler {
	return func(ctx context.Context, export string, input []byte) ([]byte, error) {
		out, err := h(ctx, export, input)
		if err != nil {
			return nil, err
		}
		return out[:len(utf16.Encode([]rune(string(out))))], nil
	}
}

// asciiStore keeps text as a Latin-1 program would: every byte above 0x7f
// that is not part of a character it knows becomes '?'.
type asciiStore struct{ appendProvider }

func (asciiStore) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	var msgs []json.RawMessage
	for _, m := range slices.Concat(req.RequestMessages, req.ResponseMessages) {
		b := bytes.Clone(m)
		for i, c := range b {
			if c > 0x7f {
				b[i] = '?'
			}
		}
		msgs = append(msgs, b)
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", msgs)}}, nil
}

// TestSuiteStoresMultiByteText: the cases that store text store multi-byte
// UTF-8 and read it back, so a provider that measures or keeps text in
// anything but UTF-8 bytes fails them.
func TestSuiteStoresMultiByteText(t *testing.T) {
	broken := []struct {
		name   string
		reason Reason
		f      Factory
	}{
		{"cuts its output at the UTF-16 length", ReasonCallFailed, func(ctx context.Context) (Subject, error) {
			return newHandlerSubject(ctx, utf16Output(sdk.Handler(valueProvider{})))
		}},
		{"turns non-ASCII bytes into '?'", ReasonWrongHistory, factoryOf(func() sdk.Provider { return asciiStore{} })},
	}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			err := caseNamed(t, "provide_returns_stored_in_order").Run(t.Context(), b.f)
			var failure *Failure
			require.ErrorAs(t, err, &failure, "the case passed a provider that %s", b.name)
			assert.Equal(t, b.reason, failure.Reason, "%v", err)
		})
	}
}

func caseNamed(t *testing.T, name string) Case {
	t.Helper()
	for _, c := range CasesWith(olderStates) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return Case{}
}
