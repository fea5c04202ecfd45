package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/schemas"
)

var digest = strings.Repeat("0123456789abcdef", 4)

// turnSession is a session as a turn through a database plugin commits
// it: a slot, its provenance, and the runs with their replies.
func turnSession(runs int) *Session {
	s := &Session{SchemaVersion: 1, SessionID: "s-1", Revision: int64(runs),
		State: map[string]ProviderState{"history": {Provider: "sqlite", StateVersion: 1, Data: json.RawMessage(`{"session":"s-1"}`)}},
		Provenance: map[string]Provenance{"history": {Plugin: "sqlite", Version: "0.1.0", SHA256: digest,
			Storage: "postgres:history", Session: "s-1", Revision: int64(runs)}},
	}
	for i := 1; i <= runs; i++ {
		s.RecentRuns = append(s.RecentRuns, RunRecord{RunID: fmt.Sprintf("run-%d", i), InputSHA256: digest, Revision: int64(i),
			Reply: json.RawMessage(`[{"role":"assistant","contents":[{"type":"text","text":"ok"}]}]`)})
	}
	return s
}

func TestPlainSessionIsWhatATurnCommits(t *testing.T) {
	unknownInput := turnSession(1)
	unknownInput.RecentRuns[0].InputSHA256 = "" // a run read from last_run_id
	for _, s := range []*Session{turnSession(0), turnSession(1), turnSession(64), unknownInput} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		assert.True(t, plainSession(b), "%s", b)
		require.NoError(t, schema.Project(schemas.Session).Validate(b))
	}
}

// TestPlainSessionLeavesTheRestToTheSchema: what the one pass is unsure
// of goes to the schema, which decides as it always has.
func TestPlainSessionLeavesTheRestToTheSchema(t *testing.T) {
	b, err := json.Marshal(turnSession(2))
	require.NoError(t, err)
	base := string(b)
	tests := []struct {
		name  string
		doc   string
		valid bool // the schema's verdict
	}{
		{"schema_version 1.0", strings.Replace(base, `"schema_version":1`, `"schema_version":1.0`, 1), true},
		{"schema_version 2", strings.Replace(base, `"schema_version":1`, `"schema_version":2`, 1), false},
		{"revision past the largest", strings.Replace(base, `"session_id":"s-1","revision":2`, `"session_id":"s-1","revision":9223372036854775807`, 1), false},
		{"negative revision", strings.Replace(base, `"session_id":"s-1","revision":2`, `"session_id":"s-1","revision":-1`, 1), false},
		{"duplicate member", strings.Replace(base, `"session_id":"s-1"`, `"session_id":"s-1","session_id":"s-2"`, 1), true},
		{"session_id null", strings.Replace(base, `"session_id":"s-1"`, `"session_id":null`, 1), false},
		{"no revision", strings.Replace(base, `"session_id":"s-1","revision":2,`, `"session_id":"s-1",`, 1), false},
		{"empty slot name", strings.Replace(base, `"state":{"history"`, `"state":{""`, 1), false},
		{"state_version past int32", strings.Replace(base, `"state_version":1`, `"state_version":2147483648`, 1), false},
		{"no data", strings.Replace(base, `,"data":{"session":"s-1"}`, ``, 1), false},
		{"upper-case digest", strings.Replace(base, `"input_sha256":"`+digest, `"input_sha256":"`+strings.ToUpper(digest), 1), false},
		{"empty storage", strings.Replace(base, `"storage":"postgres:history"`, `"storage":""`, 1), false},
		{"empty plugin digest", strings.Replace(base, `"sha256":"`+digest, `"sha256":"`, 1), false},
		{"reply dropped beside a reply", strings.Replace(base, `"revision":1,"reply":`, `"revision":1,"reply_dropped":true,"reply":`, 1), false},
		{"reply of a string", strings.Replace(base, `"reply":[{"role"`, `"reply":["x",{"role"`, 1), false},
		{"run id of 257 characters", strings.Replace(base, `"run-1"`, `"`+strings.Repeat("r", 257)+`"`, 1), false},
		{"run id of 256 characters in 512 bytes", strings.Replace(base, `"run-1"`, `"`+strings.Repeat("é", 256)+`"`, 1), true},
		{"65 runs", marshal(t, turnSession(65)), false},
		{"last_run_id", strings.Replace(base, `"session_id":"s-1",`, `"session_id":"s-1","last_run_id":"r",`, 1), true},
		{"unknown member", strings.Replace(base, `"session_id":"s-1",`, `"session_id":"s-1","x":1,`, 1), false},
		{"trailing value", base + ` {}`, false},
	}
	sch := schema.Project(schemas.Session)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEqual(t, base, tt.doc, "the case changes the document")
			assert.False(t, plainSession([]byte(tt.doc)), "the one pass decides what it should leave to the schema")
			err := sch.Validate(json.RawMessage(tt.doc))
			if tt.valid {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, schema.ErrInvalid)
			}
			if err != nil {
				_, derr := Decode([]byte(tt.doc))
				require.ErrorIs(t, derr, ErrInvalid, "Decode refuses what the schema refuses")
			}
		})
	}
}

func marshal(t *testing.T, s *Session) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// FuzzPlainSession: whatever the one pass accepts, the schema accepts.
func FuzzPlainSession(f *testing.F) {
	for _, runs := range []int{0, 1, 3} {
		b, _ := json.Marshal(turnSession(runs))
		f.Add(b)
	}
	f.Add([]byte(`{"schema_version":1,"session_id":"","revision":0}`))
	f.Add([]byte(`{"schema_version":1,"session_id":"x","revision":0,"state":{"a":{"provider":"p","state_version":0,"data":null}}}`))
	sch := schema.Project(schemas.Session)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if plainSession(doc) {
			if err := sch.Validate(doc); err != nil {
				t.Fatalf("plainSession accepted what the schema refuses: %v\n%s", err, doc)
			}
		}
	})
}

// TestPlainSessionAllocatesNothing: the one pass exists to spare a turn
// the schema library's allocations.
func TestPlainSessionAllocatesNothing(t *testing.T) {
	b, err := json.Marshal(turnSession(64))
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(20, func() { plainSession(b) }))
}

// TestValidateTakesThePlainPath: a session a turn commits, new to the
// process, is accepted without the schema library (which allocates
// hundreds of objects for it).
func TestValidateTakesThePlainPath(t *testing.T) {
	const runs = 21
	docs := make([][]byte, runs+1)
	for i := range docs {
		docs[i] = []byte(marshal(t, turnSession(10+i))) // a new document each time
	}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		require.NoError(t, validate(docs[i]))
		i++
	})
	assert.Less(t, allocs, 5.0)
}
