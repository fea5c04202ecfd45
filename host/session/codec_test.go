package session_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmhist/wasmhist/host/session"
)

const validSession = `{
  "schema_version": 1,
  "session_id": "s-1",
  "service_session_id": "resp_123",
  "revision": 7,
  "state": {
    "history": {"provider": "inmemory", "state_version": 1, "data": {"messages": [{"role": "user", "contents": [{"type": "text", "text": "hi"}]}]}},
    "audit": {"provider": "inmemory", "state_version": 1, "data": {"messages": []}}
  }
}`

func TestDecodeSession(t *testing.T) {
	s, err := session.Decode([]byte(validSession))
	if err != nil {
		t.Fatal(err)
	}
	want := &session.Session{
		SchemaVersion: 1, SessionID: "s-1", ServiceSessionID: "resp_123", Revision: 7,
		State: map[string]session.ProviderState{
			"history": {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages": [{"role": "user", "contents": [{"type": "text", "text": "hi"}]}]}`)},
			"audit":   {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages": []}`)},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("DecodeSession = %+v\nwant %+v", s, want)
	}
	// What DecodeSession accepts, encoding/json reads identically.
	var plain session.Session
	if err := json.Unmarshal([]byte(validSession), &plain); err != nil || !reflect.DeepEqual(&plain, s) {
		t.Fatalf("json.Unmarshal disagrees: %+v, %v", plain, err)
	}
}

func TestDecodeSessionRefusesWithWhatAndWhere(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"empty", ``, []string{"not valid JSON"}},
		{"truncated", validSession[:60], []string{"not valid JSON"}},
		{"not an object", `[]`, []string{"(document root)", "expected object"}},
		{"missing session_id", `{"schema_version":1,"revision":0}`, []string{"(document root)", "session_id"}},
		{"session_id not a string", `{"schema_version":1,"session_id":5,"revision":0}`, []string{"at /session_id", "expected string"}},
		{"negative revision", `{"schema_version":1,"session_id":"s","revision":-1}`, []string{"at /revision", "minimum"}},
		{"revision overflows int64", `{"schema_version":1,"session_id":"s","revision":9223372036854775808}`, []string{"at /revision", "maximum"}},
		{"fractional revision", `{"schema_version":1,"session_id":"s","revision":1.5}`, []string{"at /revision", "expected integer"}},
		{"integral float revision", `{"schema_version":1,"session_id":"s","revision":1.0}`, []string{"revision", "int64"}},
		{"newer schema version", `{"schema_version":2,"session_id":"s","revision":0}`, []string{"at /schema_version", "const"}},
		{"unknown property", `{"schema_version":1,"session_id":"s","revision":0,"sesion_id":"x"}`, []string{"'sesion_id' not allowed"}},
		{"slot without data", `{"schema_version":1,"session_id":"s","revision":0,"state":{"h":{"provider":"p","state_version":1}}}`, []string{"at /state/h", "'data'"}},
		{"slot with bad provider", `{"schema_version":1,"session_id":"s","revision":0,"state":{"h":{"provider":"","state_version":1,"data":{}}}}`, []string{"at /state/h/provider"}},
		{"slot state_version a string", `{"schema_version":1,"session_id":"s","revision":0,"state":{"h":{"provider":"p","state_version":"1","data":{}}}}`, []string{"at /state/h/state_version"}},
		{"empty state key", `{"schema_version":1,"session_id":"s","revision":0,"state":{"":{"provider":"p","state_version":1,"data":{}}}}`, []string{"at /state"}},
		{"trailing garbage", validSession + `x`, []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := session.Decode([]byte(tt.doc))
			if !errors.Is(err, session.ErrInvalid) {
				t.Fatalf("DecodeSession = %+v, %v; want ErrInvalidSession", s, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestEncodeSession(t *testing.T) {
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "s", State: map[string]session.ProviderState{
		"h": {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages": []}`)},
	}}
	b, err := session.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := session.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.SessionID != "s" || string(back.State["h"].Data) != `{"messages":[]}` {
		t.Fatalf("round trip gave %+v", back)
	}
	bad := []*session.Session{nil, {SessionID: "no version"}, {SchemaVersion: 1, Revision: -1}, {SchemaVersion: 1, State: map[string]session.ProviderState{"h": {StateVersion: 1, Data: json.RawMessage(`{}`)}}}}
	for i, s := range bad {
		if _, err := session.Encode(s); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("EncodeSession(bad[%d]) = %v, want ErrInvalidSession", i, err)
		}
	}
}

// FuzzDecodeSession: decoding never panics, every refusal is
// ErrInvalidSession, and whatever is accepted encodes to a fixed point.
func FuzzDecodeSession(f *testing.F) {
	f.Add([]byte(validSession))
	f.Add([]byte(validSession[:len(validSession)/2]))
	f.Add([]byte(`{"schema_version":1,"session_id":"s","revision":0}`))
	f.Add([]byte(`{"schema_version":"1","session_id":["s"],"revision":{}}`))
	f.Add([]byte(`{"schema_version":1,"session_id":"s","revision":1e400}`))
	f.Add([]byte(`{"schema_version":1,"session_id":"s","revision":0,"state":{"k":{"provider":"p","state_version":1,"data":null}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := session.Decode(data)
		if err != nil {
			if !errors.Is(err, session.ErrInvalid) {
				t.Fatalf("DecodeSession error %v is not ErrInvalidSession", err)
			}
			return
		}
		b1, err := session.Encode(s)
		if err != nil {
			t.Fatalf("accepted session does not encode: %v", err)
		}
		s2, err := session.Decode(b1)
		if err != nil {
			t.Fatalf("encoded session does not decode: %v\n%s", err, b1)
		}
		b2, err := session.Encode(s2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s\n%v", b1, b2, err)
		}
	})
}
