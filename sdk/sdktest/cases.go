package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/wasmhist/wasmhist/abi"
)

// Reasons of the cases in this file, each reported by the case it names.
const (
	// describe: describe's answer is not PluginInfo with a name, a state
	// schema and a valid initial state.
	ReasonDescribeInvalid Reason = "describe_invalid"
	// describe: the plugin speaks another ABI major.
	ReasonABIMajor Reason = "abi_major"
	// empty_state_initialised: provide or store fails on the initial state.
	ReasonInitialStateRejected Reason = "initial_state_rejected"
	// state_round_trips_through_json: the state, re-encoded by another JSON
	// library, is refused or gives other results.
	ReasonReencodedStateDiffers Reason = "reencoded_state_differs"
	// state_keys_isolated: a key's history holds another key's messages or
	// misses its own.
	ReasonKeysMixed Reason = "keys_mixed"
	// unknown_fields_tolerated: unknown fields of a message were not kept.
	ReasonUnknownFieldsDropped Reason = "unknown_fields_dropped"
	// unknown_fields_tolerated: a request with unknown fields was refused.
	ReasonUnknownFieldsRejected Reason = "unknown_fields_rejected"
	// stateless_across_instances: results depend on the instance serving a
	// call.
	ReasonInstanceDependent Reason = "instance_dependent"
	// malformed_requests_rejected: a malformed request got something else
	// than invalid_argument.
	ReasonMalformedAccepted Reason = "malformed_not_invalid_argument"
)

// newSubject is f's next subject; a factory error is load_failed.
func newSubject(ctx context.Context, f Factory) (Subject, error) {
	s, err := f(ctx)
	if err != nil {
		return nil, failf(ReasonLoadFailed, "new subject: %w", err)
	}
	judgeOf(ctx).declare(s)
	return s, nil
}

func caseDescribe(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	out, err := s.Call(ctx, abi.ExportDescribe, nil)
	if err != nil {
		return failf(ReasonDescribeInvalid, "describe: %w", err)
	}
	var info abi.PluginInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return failf(ReasonDescribeInvalid, "describe returned %s, not PluginInfo: %w", out, err)
	}
	if info.Name == "" {
		return failf(ReasonDescribeInvalid, "describe returned no name: %s", out)
	}
	major, _, err := abi.ParseVersion(info.ABI)
	if err != nil {
		return failf(ReasonDescribeInvalid, "describe: %w", err)
	}
	if major != abi.Major {
		return failf(ReasonABIMajor, "describe: ABI %s, want major %d", info.ABI, abi.Major)
	}
	if len(info.StateSchema) == 0 || !json.Valid(info.StateSchema) {
		return failf(ReasonDescribeInvalid, "describe: state_schema %q is not a JSON document", info.StateSchema)
	}
	if got := s.Info().Name; got != info.Name {
		return failf(ReasonDescribeInvalid, "the subject's Info names %q, describe %q", got, info.Name)
	}
	if init := s.InitialState(); !json.Valid(init) {
		return failf(ReasonDescribeInvalid, "initial state %q is not JSON", init)
	}
	return nil
}

func caseEmptyState(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	sl := newSlot(s, newSessionID(), "history")
	history, err := sl.provide(ctx, s, textMessage(abi.RoleUser, "hello"))
	if err != nil {
		return because(ReasonInitialStateRejected, fmt.Errorf("on the initial state: %w", err))
	}
	if len(history) != 0 {
		return failf(ReasonWrongHistory, "provide on the initial state returned %d messages, want none: %s", len(history), summary(history))
	}
	t := script("first", 1)[0]
	if err := sl.store(ctx, s, t); err != nil {
		return because(ReasonInitialStateRejected, fmt.Errorf("on the initial state: %w", err))
	}
	history, err = sl.provide(ctx, s)
	if err != nil {
		return err
	}
	return sameMessages(history, stored([]turn{t}))
}

func caseStoredInOrder(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	turns := script("order", 4)
	sl := newSlot(s, newSessionID(), "history")
	for i, t := range turns {
		if err := sl.store(ctx, s, t); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		// The request of provide is the next run's input: it must not
		// show up in the history.
		history, err := sl.provide(ctx, s, textMessage(abi.RoleUser, fmt.Sprintf("order: next input %d", i)))
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		if err := sameMessages(history, stored(turns[:i+1])); err != nil {
			return fmt.Errorf("provide after %d stores: %w", i+1, err)
		}
	}
	return nil
}

func caseStateRoundTrip(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	turns := script("round-trip", 4)
	keep := func(state json.RawMessage) (json.RawMessage, error) { return state, nil }
	direct, err := runTurns(ctx, s, newSlot(s, newSessionID(), "history"), turns, keep)
	if err != nil {
		return fmt.Errorf("state kept as returned: %w", err)
	}
	viaJSON, err := runTurns(ctx, s, newSlot(s, newSessionID(), "history"), turns, reencode)
	if err != nil {
		return because(ReasonReencodedStateDiffers, fmt.Errorf("state re-encoded between calls: %w", err))
	}
	for i := range turns {
		if err := sameMessages(direct[i], stored(turns[:i+1])); err != nil {
			return fmt.Errorf("state kept as returned, provide after %d stores: %w", i+1, err)
		}
		if err := sameMessages(viaJSON[i], direct[i]); err != nil {
			return because(ReasonReencodedStateDiffers, fmt.Errorf("state re-encoded between calls, provide after %d stores: %w", i+1, err))
		}
	}
	return nil
}

// runTurns stores each turn and provides after it, passing the state
// through between before every call, and returns what each provide returned.
func runTurns(ctx context.Context, s Subject, sl *slot, turns []turn, between func(json.RawMessage) (json.RawMessage, error)) ([][]json.RawMessage, error) {
	var histories [][]json.RawMessage
	for i, t := range turns {
		var err error
		if sl.state, err = between(sl.state); err != nil {
			return nil, err
		}
		if err := sl.store(ctx, s, t); err != nil {
			return nil, fmt.Errorf("turn %d: %w", i, err)
		}
		if sl.state, err = between(sl.state); err != nil {
			return nil, err
		}
		history, err := sl.provide(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", i, err)
		}
		histories = append(histories, history)
	}
	return histories, nil
}

// reencode passes a state through a session document as another program
// would keep it: decoded into generic values (numbers become float64, as in
// JavaScript), nested in a session, written indented with sorted keys and
// read back. A provider may rely on the state's JSON value, never on its
// bytes.
func reencode(state json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(state, &v); err != nil {
		return nil, fmt.Errorf("re-encode state %q: %w", state, err)
	}
	session := map[string]any{
		"schema_version": 1,
		"session_id":     "round-trip",
		"state":          map[string]any{"history": map[string]any{"provider": "subject", "state_version": 1, "data": v}},
	}
	doc, err := json.MarshalIndent(session, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("re-encode state: %w", err)
	}
	var back struct {
		State map[string]struct {
			Data json.RawMessage `json:"data"`
		} `json:"state"`
	}
	if err := json.Unmarshal(doc, &back); err != nil {
		return nil, fmt.Errorf("re-encode state: %w", err)
	}
	return back.State["history"].Data, nil
}

func caseKeysIsolated(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	shared := newSessionID()
	slots := []*slot{
		newSlot(s, shared, "primary"),
		newSlot(s, shared, "audit"),
		newSlot(s, newSessionID(), "primary"),
	}
	names := []string{"session 1 key primary", "session 1 key audit", "session 2 key primary"}
	turns := [][]turn{script("s1-primary", 3), script("s1-audit", 3), script("s2-primary", 3)}
	// Interleave the stores, so a provider that mixes keys mixes them.
	for i := range 3 {
		for k, sl := range slots {
			if err := sl.store(ctx, s, turns[k][i]); err != nil {
				return fmt.Errorf("%s: %w", names[k], err)
			}
		}
	}
	for k, sl := range slots {
		history, err := sl.provide(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", names[k], err)
		}
		if err := sameMessages(history, stored(turns[k])); err != nil {
			return because(ReasonKeysMixed, fmt.Errorf("%s: %w", names[k], err))
		}
	}
	return nil
}

func caseUnknownFields(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	// Messages from a newer host: unknown fields on the message and on its
	// parts, and a part type this ABI version does not know.
	t := turn{
		request: []json.RawMessage{json.RawMessage(`{"role":"user","contents":[` +
			`{"type":"text","text":"unknown fields","x_part_extra":{"a":[1,true,null,"s"]}},` +
			`{"type":"x_future_part","payload":{"k":"v","n":12345678901234}}],` +
			`"x_message_extra":{"nested":{"deep":[1,2,3]}},"message_id":"m-1"}`)},
		response: []json.RawMessage{json.RawMessage(`{"role":"assistant","contents":[{"type":"text","text":"kept"}],` +
			`"x_reply_extra":"kept too","additional_properties":{"vendor":{"id":7}}}`)},
	}
	sl := newSlot(s, newSessionID(), "history")
	if err := sl.store(ctx, s, t); err != nil {
		return err
	}
	history, err := sl.provide(ctx, s)
	if err != nil {
		return err
	}
	if err := sameMessages(history, stored([]turn{t})); err != nil {
		return because(ReasonUnknownFieldsDropped, fmt.Errorf("unknown fields of messages not preserved: %w", err))
	}

	// Requests from a newer host: unknown fields in the envelope and in the
	// session facts. Raw requests, because Subject methods cannot add them.
	session := fmt.Sprintf(`{"session_id":%q,"state_key":"history","x_facts_extra":{"a":1}}`, newSessionID())
	state := s.InitialState()
	msg := textMessage(abi.RoleUser, "raw")
	requests := []struct{ export, input string }{
		{abi.ExportProvide, `{"state":` + string(state) + `,"session":` + session + `,"request_messages":[` + string(msg) + `],"x_envelope_extra":{"future":true}}`},
		{abi.ExportStore, `{"state":` + string(state) + `,"session":` + session + `,"request_messages":[` + string(msg) + `],"response_messages":[],"x_envelope_extra":[1,2]}`},
	}
	for _, r := range requests {
		out, err := s.Call(ctx, r.export, []byte(r.input))
		if err != nil {
			return because(ReasonUnknownFieldsRejected, fmt.Errorf("%s with unknown request fields: %w", r.export, err))
		}
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(out, &resp); err != nil {
			return because(ReasonUnknownFieldsRejected, fmt.Errorf("%s with unknown request fields returned %q, not a JSON object: %w", r.export, out, err))
		}
	}
	return nil
}

// statelessRun is one way of spreading the calls of two sessions over
// instances: pick says which session takes its next step and on which of
// the subjects.
type statelessRun struct {
	name string
	pick func(step int, remaining [2]int) (session, subject int)
}

func caseStateless(ctx context.Context, f Factory) error {
	subjects := make([]Subject, 3)
	for i := range subjects {
		var err error
		if subjects[i], err = newSubject(ctx, f); err != nil {
			return err
		}
	}
	turns := [2][]turn{script("stateless-a", 4), script("stateless-b", 4)}
	rng := rand.New(rand.NewPCG(1, 2))
	runs := []statelessRun{
		{name: "one instance, session a then b", pick: func(_ int, rem [2]int) (int, int) {
			if rem[0] > 0 {
				return 0, 0
			}
			return 1, 0
		}},
		{name: "sessions alternating, instances round-robin", pick: func(step int, rem [2]int) (int, int) {
			if rem[step%2] > 0 {
				return step % 2, step % 3
			}
			return 1 - step%2, step % 3
		}},
		{name: "session b then a, instances in reverse", pick: func(step int, rem [2]int) (int, int) {
			if rem[1] > 0 {
				return 1, 2 - step%3
			}
			return 0, 2 - step%3
		}},
		{name: "seeded random order and instances", pick: func(_ int, rem [2]int) (int, int) {
			session := rng.IntN(2)
			if rem[session] == 0 {
				session = 1 - session
			}
			return session, rng.IntN(3)
		}},
	}
	var want [2][][]json.RawMessage
	for k := range turns {
		for i := range turns[k] {
			want[k] = append(want[k], stored(turns[k][:i+1]))
		}
	}
	for _, run := range runs {
		got, err := runInterleaved(ctx, subjects, turns, run)
		if err != nil {
			return fmt.Errorf("%s: %w", run.name, err)
		}
		for k := range turns {
			for i := range want[k] {
				if err := sameMessages(got[k][i], want[k][i]); err != nil {
					return because(ReasonInstanceDependent, fmt.Errorf("%s: session %c, provide after %d stores: %w", run.name, 'a'+k, i+1, err))
				}
			}
		}
	}
	return nil
}

// runInterleaved runs each session's steps (store a turn, provide, ...) in
// the order and on the subjects run.pick chooses, with fresh session ids.
func runInterleaved(ctx context.Context, subjects []Subject, turns [2][]turn, run statelessRun) ([2][][]json.RawMessage, error) {
	var got [2][][]json.RawMessage
	slots := [2]*slot{newSlot(subjects[0], newSessionID(), "history"), newSlot(subjects[0], newSessionID(), "history")}
	var next [2]int // next step of each session: 2i stores turn i, 2i+1 provides
	remaining := [2]int{2 * len(turns[0]), 2 * len(turns[1])}
	for step := 0; remaining[0]+remaining[1] > 0; step++ {
		k, sub := run.pick(step, remaining)
		s := subjects[sub]
		i := next[k] / 2
		if next[k]%2 == 0 {
			if err := slots[k].store(ctx, s, turns[k][i]); err != nil {
				return got, fmt.Errorf("session %c turn %d on instance %d: %w", 'a'+k, i, sub, err)
			}
		} else {
			history, err := slots[k].provide(ctx, s)
			if err != nil {
				return got, fmt.Errorf("session %c turn %d on instance %d: %w", 'a'+k, i, sub, err)
			}
			got[k] = append(got[k], history)
		}
		next[k]++
		remaining[k]--
	}
	return got, nil
}

func caseMalformed(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	session := fmt.Sprintf(`{"session_id":%q,"state_key":"history"}`, newSessionID())
	state := string(s.InitialState())
	msg := string(textMessage(abi.RoleUser, "hello"))
	// Each request is well formed but for the one defect it is named by.
	request := func(session, requestMessages, responseMessages string) string {
		return `{"state":` + state + `,"session":` + session + `,"request_messages":` + requestMessages + `,"response_messages":` + responseMessages + `}`
	}
	tests := []struct{ export, name, input string }{
		{abi.ExportDescribe, "bad JSON", `{"x":`},
		{abi.ExportProvide, "bad JSON", `{"session":`},
		{abi.ExportProvide, "not JSON at all", `provide me`},
		{abi.ExportProvide, "an array, not an object", `[` + msg + `]`},
		{abi.ExportProvide, "session of the wrong type", request(`"s-1"`, `[`+msg+`]`, `[]`)},
		{abi.ExportProvide, "request_messages of the wrong type", request(session, msg, `[]`)},
		{abi.ExportProvide, "a message that is not an object", request(session, `["hello"]`, `[]`)},
		{abi.ExportStore, "bad JSON", `not json`},
		{abi.ExportStore, "truncated", request(session, `[`+msg+`]`, `[]`)[:40]},
		{abi.ExportStore, "response_messages of the wrong type", request(session, `[]`, `42`)},
		{abi.ExportStore, "a request message that is not an object", request(session, `[1]`, `[]`)},
		{abi.ExportStore, "a response message that is not an object", request(session, `[]`, `[[]]`)},
	}
	for _, tt := range tests {
		_, err := s.Call(ctx, tt.export, []byte(tt.input))
		if !errors.Is(err, abi.ErrInvalidArgument) {
			return failf(ReasonMalformedAccepted, "%s with %s: err = %v, want an error matching abi.ErrInvalidArgument", tt.export, tt.name, err)
		}
	}
	// The same subject still serves well-formed calls.
	t := script("after-malformed", 1)[0]
	sl := newSlot(s, newSessionID(), "history")
	if err := sl.store(ctx, s, t); err != nil {
		return fmt.Errorf("after malformed requests: %w", err)
	}
	history, err := sl.provide(ctx, s)
	if err != nil {
		return fmt.Errorf("after malformed requests: %w", err)
	}
	if err := sameMessages(history, stored([]turn{t})); err != nil {
		return fmt.Errorf("after malformed requests: %w", err)
	}
	return nil
}
