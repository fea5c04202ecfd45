package session_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	want := &session.Session{
		SchemaVersion: 1, SessionID: "s-1", ServiceSessionID: "resp_123", Revision: 7,
		State: map[string]session.ProviderState{
			"history": {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages": [{"role": "user", "contents": [{"type": "text", "text": "hi"}]}]}`)},
			"audit":   {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages": []}`)},
		},
	}
	require.Equal(t, want, s)
	// What DecodeSession accepts, encoding/json reads identically.
	var plain session.Session
	require.NoError(t, json.Unmarshal([]byte(validSession), &plain))
	assert.Equal(t, s, &plain, "json.Unmarshal disagrees")
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
		{"revision overflows int64", `{"schema_version":1,"session_id":"s","revision":9223372036854775808}`, []string{"at /revision", "9223372036854775808 is past the largest revision, 9223372036854775806", "new session"}},
		{"revision whose next commit overflows", `{"schema_version":1,"session_id":"s","revision":9223372036854775807}`, []string{"at /revision", "9223372036854775807 is past the largest revision, 9223372036854775806", "overflow"}},
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
			require.ErrorIs(t, err, session.ErrInvalid, "DecodeSession = %+v", s)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// TestDecodeSessionAtMaxRevision: the largest revision is a valid session;
// only what lies beyond is refused.
func TestDecodeSessionAtMaxRevision(t *testing.T) {
	s, err := session.Decode([]byte(`{"schema_version":1,"session_id":"s","revision":9223372036854775806}`))
	require.NoError(t, err)
	require.EqualValues(t, session.MaxRevision, s.Revision)
	_, err = session.Encode(&session.Session{SchemaVersion: 1, SessionID: "s", Revision: session.MaxRevision + 1})
	require.ErrorIs(t, err, session.ErrInvalid)
}

func TestEncodeSession(t *testing.T) {
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "s", State: map[string]session.ProviderState{
		"h": {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages": []}`)},
	}}
	b, err := session.Encode(s)
	require.NoError(t, err)
	back, err := session.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, "s", back.SessionID)
	assert.Equal(t, `{"messages":[]}`, string(back.State["h"].Data))
	bad := []*session.Session{nil, {SessionID: "no version"}, {SchemaVersion: 1, Revision: -1}, {SchemaVersion: 1, State: map[string]session.ProviderState{"h": {StateVersion: 1, Data: json.RawMessage(`{}`)}}}}
	for i, s := range bad {
		_, err := session.Encode(s)
		assert.ErrorIs(t, err, session.ErrInvalid, "EncodeSession(bad[%d])", i)
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
	f.Add([]byte(`{"schema_version":1,"session_id":"s","revision":2,"recent_runs":[{"run_id":"r","input_sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","revision":2,"reply":[ {"role":"assistant","contents":[]} ]}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := session.Decode(data)
		if err != nil {
			require.ErrorIs(t, err, session.ErrInvalid)
			return
		}
		b1, err := session.Encode(s)
		require.NoError(t, err, "accepted session does not encode")
		s2, err := session.Decode(b1)
		require.NoError(t, err, "encoded session does not decode:\n%s", b1)
		b2, err := session.Encode(s2)
		require.NoError(t, err)
		require.Equal(t, string(b1), string(b2), "encoding is not a fixed point")
	})
}

// Pending tool calls round-trip through Encode and Decode, and a session
// written before the field existed still decodes (the field is optional).
func TestPendingToolCallsRoundTrip(t *testing.T) {
	s := session.New()
	s.PendingToolCalls = []session.PendingToolCall{
		{CallID: "call_r1", Name: "clock", Arguments: json.RawMessage(`{"tz":"UTC"}`), Done: true, Result: json.RawMessage(`"12:00"`)},
		{CallID: "call_r2", Name: "clock"},
	}
	b, err := session.Encode(s)
	require.NoError(t, err)
	got, err := session.Decode(b)
	require.NoError(t, err)
	require.Equal(t, s, got)

	c := s.Clone()
	c.PendingToolCalls[0].Result[1] = 'X'
	require.Equal(t, `"12:00"`, string(s.PendingToolCalls[0].Result), "Clone shares pending bytes")

	old, err := session.Decode([]byte(`{"schema_version":1,"session_id":"x","revision":0}`))
	require.NoError(t, err)
	require.Nil(t, old.PendingToolCalls)
}

// Provenance round-trips through Encode and Decode, a session without it
// still decodes, and a malformed entry is refused where it is wrong.
func TestProvenanceRoundTrip(t *testing.T) {
	s := session.New()
	s.SetState("history", slot(`{}`))
	s.SetProvenance("history", session.Provenance{
		Plugin: "sqlite", Version: "0.1.0",
		SHA256:  "dc12c7b05287a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a",
		Storage: "sqlite:/var/lib/wasmhist/h.db",
	})
	b, err := session.Encode(s)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"provenance":{"history":{"plugin":"sqlite","version":"0.1.0","sha256":"dc12c7b05287`)
	got, err := session.Decode(b)
	require.NoError(t, err)
	require.Equal(t, s, got)

	c := s.Clone()
	c.SetProvenance("history", session.Provenance{Plugin: "other"})
	assert.Equal(t, "sqlite", s.Provenance["history"].Plugin, "SetProvenance on a clone changed the original")

	old, err := session.Decode([]byte(`{"schema_version":1,"session_id":"x","revision":0}`))
	require.NoError(t, err)
	require.Nil(t, old.Provenance)

	for doc, want := range map[string]string{
		`{"schema_version":1,"session_id":"s","revision":0,"provenance":{"h":{"version":"1"}}}`:               "at /provenance/h",
		`{"schema_version":1,"session_id":"s","revision":0,"provenance":{"h":{"plugin":"p","sha256":"abc"}}}`: "at /provenance/h/sha256",
		`{"schema_version":1,"session_id":"s","revision":0,"provenance":{"h":{"plugin":"p","password":"x"}}}`: "'password' not allowed",
		`{"schema_version":1,"session_id":"s","revision":0,"provenance":{"h":{"plugin":"p","storage":""}}}`:   "at /provenance/h/storage",
	} {
		_, err := session.Decode([]byte(doc))
		require.ErrorIs(t, err, session.ErrInvalid, doc)
		assert.ErrorContains(t, err, want, doc)
	}
}

// TestDecodeChecksWhatWasNotEncoded: Encode and Decode remember the
// documents the schema accepted by content, so that a commit's documents
// and the next load are checked once; bytes edited after they were
// accepted, in place or into a longer document, are checked again and
// refused.
func TestDecodeChecksWhatWasNotEncoded(t *testing.T) {
	s, err := session.Decode([]byte(validSession))
	require.NoError(t, err)
	doc, err := session.Encode(s)
	require.NoError(t, err)
	again, err := session.Decode(bytes.Clone(doc))
	require.NoError(t, err, "a copy of an encoded session")
	redone, err := session.Encode(again)
	require.NoError(t, err)
	require.Equal(t, string(doc), string(redone))

	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"edited in place", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"schema_version":1`), []byte(`"schema_version":2`), 1)
		}, "/schema_version"},
		{"a member added", func(b []byte) []byte {
			return append(bytes.TrimSuffix(b, []byte("}")), []byte(`,"x":1}`)...)
		}, "additional"},
		{"data after it", func(b []byte) []byte { return append(bytes.Clone(b), " {}"...) }, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := tc.edit(doc)
			require.NotEqual(t, string(doc), string(edited))
			_, err := session.Decode(edited)
			require.ErrorIs(t, err, session.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// The very bytes Encode returned, edited in place.
	copy(doc[bytes.Index(doc, []byte(`"schema_version":1`)):], `"schema_version":3`)
	_, err = session.Decode(doc)
	require.ErrorIs(t, err, session.ErrInvalid)
}
