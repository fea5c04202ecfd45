package sdk

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

var codecSeeds = []string{
	``,
	`{}`,
	`null`,
	`[]`,
	`{"session":{"session_id":"s","state_key":"k","service_session_id":"c"},"state":{"messages":[]},"config":{"max_messages":3},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],"response_messages":[]}`,
	`{"request_messages":[{"a":"\u00e9\n\"q\"","b":[1,-2.5e+3,true,false,null,{}]}], "x_future": {"deep": [[[]]]}}`,
	` { "session" : { "session_id" : "a\\b\u0041" } , "state" : null , "request_messages" : null } `,
	`{"request_messages":[1]}`,
	`{"request_messages":{}}`,
	`{"session":"s"}`,
	`{"state":01}`,
	`{"state":1.}`,
	`{"state":-}`,
	`{"state":"\x"}`,
	`{"state":"a` + "\x01" + `"}`,
	`{"state":tru}`,
	`{"a":1,}`,
	`{"a" 1}`,
	`{"a":1} x`,
	`{"request_messages":[{"k":"v"}],"request_messages":[{"k":"w"}]}`,
	`{"response_messages":[{},{"x":[1,{"y":null}]}],"state":[1,2,3]}`,
	`{"session":{"session_id":"\ud83d\ude00"}}`,
	strings.Repeat(`[`, 2000) + strings.Repeat(`]`, 2000),
	`{"cursor":"12","limit":5,"session":{"state_key":"\u00e9\t\/\b\f\r"}}`,
	`{"cursor":"a\ud800b","limit":-3,"from_version":2}`,
	`{"cursor":"\ud83d\u0041\udc00\ud800\ud800\ude00","from_version":null,"limit":null}`,
	`{"limit":1.5}`,
	`{"limit":1e2}`,
	`{"limit":99999999999999999999}`,
	`{"limit":"5"}`,
	`{"cursor":5}`,
	`{"from_version":-0,"state":{"messages":[{"a":1}]},"config":{"max_messages":3}}`,
	`{"from_version":"1"}`,
	// Found by this package's fuzzer before the scanning moved to
	// internal/guestjson (FuzzDecoder there now).
	`{"response_messAges":[0]}`,
	"\v",
	"{}\x00",
	"\x00",
}

// TestDecodeRequestsMatchEncodingJSON checks the fast decoders against
// encoding/json on the seeds: same verdict on validity, same fields. The
// scanning under them is fuzzed in internal/guestjson; these cases hold
// what the decoders add: field names, null, messages that must be objects.
func TestDecodeRequestsMatchEncodingJSON(t *testing.T) {
	for _, seed := range codecSeeds {
		t.Run(seed[:min(len(seed), 40)], func(t *testing.T) { checkDecoders(t, []byte(seed)) })
	}
}

// checkDecoders holds the fast decoders to encoding/json: they accept a
// subset of what it accepts (they also refuse messages that are not objects,
// field names in another case, and deep nesting) and, when both accept,
// decode the same fields. Raw values are compared as bytes: both keep the
// exact bytes of the input.
func checkDecoders(t *testing.T, in []byte) {
	if foldedKey(in) {
		// encoding/json matches field names case-insensitively; the ABI's
		// names are exact, so such input is decoded differently on purpose.
		return
	}
	var fastP, slowP abi.ProvideRequest
	errFastP := decodeProvideRequest(in, &fastP, nil, nil)
	errSlowP := json.Unmarshal(in, &slowP)
	var fastS, slowS abi.StoreRequest
	errFastS := decodeStoreRequest(in, &fastS, nil, nil)
	errSlowS := json.Unmarshal(in, &slowS)

	for _, err := range []error{errFastP, errFastS} {
		if err != nil {
			require.ErrorIs(t, err, guestjson.ErrSyntax)
		}
	}
	if errFastP == nil {
		require.True(t, json.Valid(in) && bytes.TrimSpace(in)[0] == '{', "provide decoder accepted %q, which is not a JSON object", in)
		if errSlowP == nil && utf8.Valid(in) {
			require.Equal(t, normalize(slowP), normalize(fastP), "provide decoders differ on %q", in)
		}
	}
	if errFastS == nil {
		require.True(t, json.Valid(in), "store decoder accepted %q, which is not JSON", in)
		slowP := abi.ProvideRequest{State: slowS.State, Config: slowS.Config, Session: slowS.Session, RequestMessages: slowS.RequestMessages}
		fastP := abi.ProvideRequest{State: fastS.State, Config: fastS.Config, Session: fastS.Session, RequestMessages: fastS.RequestMessages}
		if errSlowS == nil && utf8.Valid(in) {
			require.Equal(t, normalize(slowP), normalize(fastP), "store decoders differ on %q", in)
			require.Equal(t, normalizeMsgs(slowS.ResponseMessages), normalizeMsgs(fastS.ResponseMessages), "store decoders differ on %q", in)
		}
	}
	// A guest decodes with what it kept of the previous request's session
	// member: the same request twice decodes alike, the second time moved
	// past a remembered member, and as without a guess.
	var g sessionGuess
	var guessedP, againP abi.ProvideRequest
	errGuessedP := decodeProvideRequest(in, &guessedP, nil, &g)
	errAgainP := decodeProvideRequest(in, &againP, nil, &g)
	require.Equal(t, errFastP == nil, errGuessedP == nil, "a guess changed the verdict on %q", in)
	require.Equal(t, errFastP == nil, errAgainP == nil, "a remembered session member changed the verdict on %q", in)
	if errFastP == nil {
		require.Equal(t, normalize(fastP), normalize(guessedP), "a guess changed the decoding of %q", in)
		require.Equal(t, normalize(fastP), normalize(againP), "a remembered session member changed the decoding of %q", in)
	}
	// Valid objects that encoding/json decodes are refused only for the
	// documented reasons.
	if errSlowP == nil && json.Valid(in) && errFastP != nil {
		checkRefusal(t, "provide", in, errFastP)
	}
	checkOtherDecoders(t, in)
}

// checkRefusal fails unless err, for input encoding/json decodes, is one of
// the documented refusals.
func checkRefusal(t *testing.T, what string, in []byte, err error) {
	t.Helper()
	msg := err.Error()
	documented := strings.Contains(msg, "not a JSON object") || strings.Contains(msg, "nested deeper") || strings.Contains(msg, "want an") || strings.Contains(msg, "want a string")
	require.True(t, documented, "%s decoder refused %q, which encoding/json accepts: %v", what, in, err)
}

// checkOtherDecoders holds the decoders of list, clear, migrate_state and
// describe to encoding/json as checkDecoders does those of provide and store.
func checkOtherDecoders(t *testing.T, in []byte) {
	type decoded struct {
		fast, slow any
		errFast    error
		errSlow    error
	}
	var fastL, slowL abi.ListRequest
	var fastC, slowC abi.ClearRequest
	var fastM, slowM abi.MigrateStateRequest
	var slowD map[string]json.RawMessage
	cases := map[string]decoded{
		"list":          {&fastL, &slowL, decodeListRequest(in, &fastL, nil), json.Unmarshal(in, &slowL)},
		"clear":         {&fastC, &slowC, decodeClearRequest(in, &fastC, nil), json.Unmarshal(in, &slowC)},
		"migrate_state": {&fastM, &slowM, decodeMigrateStateRequest(in, &fastM), json.Unmarshal(in, &slowM)},
	}
	// describe takes nothing, null or an object.
	errSlowD := error(nil)
	if len(bytes.Trim(in, " \t\r\n")) > 0 {
		errSlowD = json.Unmarshal(in, &slowD)
	}
	if errFastD := checkDescribeRequest(in); errSlowD == nil && errFastD != nil {
		require.ErrorContains(t, errFastD, "nested deeper", "describe request check on %q refused what encoding/json accepts", in)
	} else {
		require.Equal(t, errSlowD == nil, errFastD == nil, "describe request check on %q: fast %v, encoding/json %v", in, errFastD, errSlowD)
	}
	normal := func(r any) any {
		switch r := r.(type) {
		case *abi.ListRequest:
			p := normalize(abi.ProvideRequest{State: r.State, Config: r.Config, Session: r.Session})
			r.State, r.Config = p.State, p.Config
		case *abi.ClearRequest:
			p := normalize(abi.ProvideRequest{State: r.State, Config: r.Config, Session: r.Session})
			r.State, r.Config = p.State, p.Config
		case *abi.MigrateStateRequest:
			p := normalize(abi.ProvideRequest{State: r.State, Config: r.Config})
			r.State, r.Config = p.State, p.Config
		}
		return r
	}
	for name, c := range cases {
		if c.errFast != nil {
			require.ErrorIs(t, c.errFast, guestjson.ErrSyntax, name)
		}
		if c.errFast == nil {
			require.True(t, json.Valid(in) && bytes.TrimSpace(in)[0] == '{', "%s decoder accepted %q, which is not a JSON object", name, in)
		}
		if c.errFast == nil && c.errSlow == nil && utf8.Valid(in) {
			require.Equal(t, normal(c.slow), normal(c.fast), "%s decoders differ on %q", name, in)
		}
		if c.errFast != nil && c.errSlow == nil {
			checkRefusal(t, name, in, c.errFast)
		}
	}
}

// foldedKey reports whether a field name of the request or its session
// matches a known field only when case is ignored.
func foldedKey(in []byte) bool {
	known := []string{"state", "config", "session", "request_messages", "response_messages", "session_id", "state_key", "service_session_id",
		"cursor", "limit", "from_version"}
	var top map[string]json.RawMessage
	if json.Unmarshal(in, &top) != nil {
		return false
	}
	var session map[string]json.RawMessage
	for k, v := range top {
		if strings.EqualFold(k, "session") {
			_ = json.Unmarshal(v, &session)
		}
	}
	for _, m := range []map[string]json.RawMessage{top, session} {
		for k := range m {
			for _, name := range known {
				if k != name && strings.EqualFold(k, name) {
					return true
				}
			}
		}
	}
	return false
}

// normalize makes encoding/json's and the fast decoder's results comparable:
// encoding/json keeps "null" in a RawMessage field, the fast decoder drops it.
func normalize(r abi.ProvideRequest) abi.ProvideRequest {
	if string(r.State) == "null" {
		r.State = nil
	}
	if string(r.Config) == "null" {
		r.Config = nil
	}
	r.RequestMessages = normalizeMsgs(r.RequestMessages)
	return r
}

func normalizeMsgs(m []json.RawMessage) []json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

func TestEncodeResponsesMatchEncodingJSON(t *testing.T) {
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","contents":[]}`), json.RawMessage(`{"a":[1,2]}`)}
	provides := []abi.ProvideResponse{
		{},
		{Messages: msgs},
		{FromState: &abi.StateSelection{Pointer: "/messages"}},
		{FromState: &abi.StateSelection{Pointer: "/a~1b/\"q\"\n\t\x01é", Window: &abi.Window{MaxMessages: 3}}},
		{FromState: &abi.StateSelection{Pointer: "/m", Window: &abi.Window{MaxTokens: 100}}},
		{FromState: &abi.StateSelection{Pointer: "/m", Window: &abi.Window{MaxMessages: 2, MaxTokens: 100}}},
		{FromState: &abi.StateSelection{Pointer: "/m", Window: &abi.Window{}}},
		{Messages: msgs, StateChange: abi.StateChange{State: json.RawMessage(`{"n":1}`)}},
		{StateChange: abi.StateChange{Patch: []abi.PatchOp{{Op: abi.PatchRemove, Path: "/x"}, {Op: abi.PatchAdd, Path: "/m/-", Value: msgs[0]}}}},
	}
	// The WebAssembly exports pass the last output's buffer as dst: what it
	// held must not show through, whether it is large enough or not.
	roomy, small := bytes.Repeat([]byte("garbage "), 512), []byte("garbage")
	for _, r := range provides {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(encodeProvideResponse(nil, &r)), "provide response")
		assert.Equal(t, string(want), string(encodeProvideResponse(roomy, &r)), "provide response over a large buffer")
		assert.Equal(t, string(want), string(encodeProvideResponse(small[:1], &r)), "provide response over a small buffer")
	}
	stores := []abi.StoreResponse{
		{},
		{StateChange: abi.StateChange{State: json.RawMessage(`{"messages":[]}`)}},
		{StateChange: abi.StateChange{Patch: AppendOps("/messages", msgs)}},
		{StateChange: abi.StateChange{Patch: AppendOps("/m\"\n", msgs, msgs)}},
		// A path written once is copied for the next operation only when
		// equal to it: paths that change back, and other operations.
		{StateChange: abi.StateChange{Patch: []abi.PatchOp{
			{Op: abi.PatchAdd, Path: "/a/-", Value: msgs[0]}, {Op: abi.PatchAdd, Path: "/b\t/-", Value: msgs[1]},
			{Op: abi.PatchAdd, Path: "/a/-", Value: msgs[1]}, {Op: abi.PatchRemove, Path: "/a/-"},
			{Op: "replace", Path: "/a/-", Value: msgs[0]}, {Op: abi.PatchAdd, Path: "/a/0"}, {Op: abi.PatchAdd, Path: "/a/0", Value: msgs[0]},
		}}},
	}
	for _, r := range stores {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(encodeStoreResponse(nil, &r)), "store response")
		assert.Equal(t, string(want), string(encodeStoreResponse(roomy, &r)), "store response over a large buffer")
		assert.Equal(t, string(want), string(encodeStoreResponse(small[:1], &r)), "store response over a small buffer")
	}
}

func TestEncodeOtherResponsesMatchEncodingJSON(t *testing.T) {
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","contents":[]}`), json.RawMessage(`{"a":[1,2]}`)}
	check := func(t *testing.T, v any, got []byte) {
		t.Helper()
		want, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
	for _, r := range []abi.ListResponse{
		{Messages: []json.RawMessage{}},
		{Messages: msgs},
		{Messages: msgs[:1], NextCursor: "1"},
		{Messages: msgs, NextCursor: "\"q\"\n\x01é\xff"},
		{Messages: []json.RawMessage{}, FromState: &abi.StateSelection{Pointer: "/messages"}},
		{Messages: []json.RawMessage{}, FromState: &abi.StateSelection{Pointer: "/a~1b/\"q\"", Window: &abi.Window{MaxMessages: 3}}},
	} {
		check(t, r, encodeListResponse(&r))
	}
	for _, r := range []abi.MigrateStateResponse{{}, {State: json.RawMessage(`{"messages":[]}`)}} {
		check(t, r, encodeMigrateStateResponse(&r))
	}
	for _, r := range []abi.PluginInfo{
		{},
		{Name: "inmemory", Version: "0.1.0", ABI: "1.0", StateVersion: 3, StateSchema: json.RawMessage(`{"type":"object"}`)},
		{
			Name: "x\t\"", Version: "v\u2028", ABI: "1.0", StateVersion: -1, StateSchema: json.RawMessage(`{}`),
			InitialState: json.RawMessage(`{"messages":[]}`), ConfigSchema: json.RawMessage(`{"type":"object"}`),
			Capabilities: []abi.Capability{abi.CapabilitySQL, "other"}, OmitState: []string{abi.ExportProvide, abi.ExportStore},
		},
	} {
		check(t, r, encodePluginInfo(&r))
	}
	for _, e := range []abi.Error{{}, {Code: abi.CodeNotFound, Message: "no \"such\"\nthread \x00"}} {
		check(t, e, encodeError(&e))
	}
}

// FuzzEncodeString holds the string encoder, which every response and error
// goes through, to encoding/json without HTML escaping.
func FuzzEncodeString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\n\r\t\x00\x1f\x7f", "é€😀", "\xff\xe2\x82", "\u2028\u2029", "<&>", "plain, then \"quoted\"", "line\nbreak", "caf\xc3\xa9 \xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		var e encoder
		e.str(s)
		require.Equal(t, want.String(), string(e.b)+"\n", "encoding %q", s)
	})
}

// TestStoreRequestArraysAreApart: the request's two message lists share one
// allocation, yet appending to the first cannot overwrite the second, and
// an element that is not an object is named by its index in its own list.
func TestStoreRequestArraysAreApart(t *testing.T) {
	var req abi.StoreRequest
	in := `{"request_messages":[{"n":1},{"n":2}],"response_messages":[{"n":3},{"n":4}]}`
	require.NoError(t, decodeStoreRequest([]byte(in), &req, nil, nil))
	require.Len(t, req.RequestMessages, 2)
	_ = append(req.RequestMessages, json.RawMessage(`{"n":"overwritten"}`))
	assert.Equal(t, []json.RawMessage{json.RawMessage(`{"n":3}`), json.RawMessage(`{"n":4}`)}, req.ResponseMessages)

	req = abi.StoreRequest{}
	err := decodeStoreRequest([]byte(`{"request_messages":[{}],"response_messages":[{},{},7]}`), &req, nil, nil)
	require.ErrorContains(t, err, "response_messages[2] is not a JSON object")
}
