package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wasmhist/wasmhist/abi"
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
}

// TestDecodeRequestsMatchEncodingJSON checks the fast decoders against
// encoding/json on the seeds: same verdict on validity, same fields.
func TestDecodeRequestsMatchEncodingJSON(t *testing.T) {
	for _, seed := range codecSeeds {
		t.Run(seed[:min(len(seed), 40)], func(t *testing.T) { checkDecoders(t, []byte(seed)) })
	}
}

func FuzzDecodeRequests(f *testing.F) {
	for _, s := range codecSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecoders)
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
	errFastP := decodeProvideRequest(in, &fastP)
	errSlowP := json.Unmarshal(in, &slowP)
	var fastS, slowS abi.StoreRequest
	errFastS := decodeStoreRequest(in, &fastS)
	errSlowS := json.Unmarshal(in, &slowS)

	for _, err := range []error{errFastP, errFastS} {
		if err != nil && !errors.Is(err, errSyntax) {
			t.Fatalf("error %v does not wrap errSyntax", err)
		}
	}
	if errFastP == nil {
		if !json.Valid(in) || bytes.TrimSpace(in)[0] != '{' {
			t.Fatalf("provide decoder accepted %q, which is not a JSON object", in)
		}
		if errSlowP == nil && utf8.Valid(in) && !reflect.DeepEqual(normalize(fastP), normalize(slowP)) {
			t.Fatalf("provide decoders differ on %q:\nfast %+v\nslow %+v", in, fastP, slowP)
		}
	}
	if errFastS == nil {
		if !json.Valid(in) {
			t.Fatalf("store decoder accepted %q, which is not JSON", in)
		}
		slowP := abi.ProvideRequest{State: slowS.State, Config: slowS.Config, Session: slowS.Session, RequestMessages: slowS.RequestMessages}
		fastP := abi.ProvideRequest{State: fastS.State, Config: fastS.Config, Session: fastS.Session, RequestMessages: fastS.RequestMessages}
		if errSlowS == nil && utf8.Valid(in) && (!reflect.DeepEqual(normalize(fastP), normalize(slowP)) ||
			!reflect.DeepEqual(normalizeMsgs(fastS.ResponseMessages), normalizeMsgs(slowS.ResponseMessages))) {
			t.Fatalf("store decoders differ on %q:\nfast %+v\nslow %+v", in, fastS, slowS)
		}
	}
	// Valid objects that encoding/json decodes are refused only for the
	// documented reasons.
	if errSlowP == nil && json.Valid(in) && errFastP != nil {
		msg := errFastP.Error()
		if !strings.Contains(msg, "not a JSON object") && !strings.Contains(msg, "nested deeper") && !strings.Contains(msg, "want an") && !strings.Contains(msg, "want a string") {
			t.Fatalf("provide decoder refused %q, which encoding/json accepts: %v", in, errFastP)
		}
	}
}

// foldedKey reports whether a field name of the request or its session
// matches a known field only when case is ignored.
func foldedKey(in []byte) bool {
	known := []string{"state", "config", "session", "request_messages", "response_messages", "session_id", "state_key", "service_session_id"}
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
	for _, r := range provides {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeProvideResponse(&r); string(got) != string(want) {
			t.Errorf("provide response\n got %s\nwant %s", got, want)
		}
	}
	stores := []abi.StoreResponse{
		{},
		{StateChange: abi.StateChange{State: json.RawMessage(`{"messages":[]}`)}},
		{StateChange: abi.StateChange{Patch: AppendOps("/messages", msgs)}},
	}
	for _, r := range stores {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeStoreResponse(&r); string(got) != string(want) {
			t.Errorf("store response\n got %s\nwant %s", got, want)
		}
	}
}
