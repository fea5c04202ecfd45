package schema

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/schemas"
)

func TestCompileRefusesWhatItCannotResolveLocally(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string // substring of the error
	}{
		{"remote ref", `{"$ref": "https://example.com/s.json"}`, "https://example.com/s.json refused"},
		{"file ref", `{"$ref": "file:///etc/passwd"}`, "file:///etc/passwd refused"},
		{"unknown meta-schema", `{"$schema": "https://example.com/meta", "type": "object"}`, "refused"},
		{"not json", `{"type": `, "invalid json"},
		{"bad keyword value", `{"type": 5}`, "type"},
		{"missing project file", `{"$ref": "https://wasmhist.dev/schemas/v1/nope.json"}`, "refused"},
		{"project prefix, file not embedded", `{"$ref": "https://wasmhist.dev/schemas/v1/testdata/inmemory-state.schema.json"}`, "refused"},
		{"project prefix, escaping the directory", `{"$ref": "https://wasmhist.dev/schemas/v1/%2e%2e/embed.go"}`, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema), "test")
			require.ErrorIs(t, err, ErrBadSchema)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCompileResolvesProjectSchemas(t *testing.T) {
	s, err := Compile(json.RawMessage(`{
		"type": "object",
		"properties": {"messages": {"type": "array", "items": {"$ref": "https://wasmhist.dev/schemas/v1/message.json"}}}
	}`), "state")
	require.NoError(t, err)
	err = s.Validate(json.RawMessage(`{"messages": [{"role": "user", "contents": [{"type": "text", "text": "hi"}]}]}`))
	require.NoError(t, err, "valid state refused")
	err = s.Validate(json.RawMessage(`{"messages": [{"role": "user", "contents": []}, {"role": "robot", "contents": []}]}`))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve, "want a *ValidationError")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, "/messages/1/role", ve.Problems[0].InstanceLocation, "instance location (error: %v)", err)
	require.Contains(t, ve.Problems[0].KeywordLocation, "message.json#/properties/role/enum", "keyword location: want the role enum of message.json")
}

func TestValidateSaysWhereAndWhat(t *testing.T) {
	sess := Project("session.json")
	tests := []struct {
		name    string
		doc     string
		at      string
		keyword string
	}{
		{"not json", `{"schema_version": 1,`, "", ""},
		{"trailing data", `{"schema_version":1,"session_id":"s","revision":0} {}`, "", ""},
		{"wrong type", `{"schema_version":1,"session_id":7,"revision":0}`, "/session_id", "type"},
		{"negative revision", `{"schema_version":1,"session_id":"s","revision":-1}`, "/revision", "minimum"},
		{"missing data", `{"schema_version":1,"session_id":"s","revision":0,"state":{"k":{"provider":"p","state_version":1}}}`, "/state/k", "required"},
		{"unknown property", `{"schema_version":1,"session_id":"s","revision":0,"extra":1}`, "", "additionalProperties"},
		{"future version", `{"schema_version":2,"session_id":"s","revision":0}`, "/schema_version", "const"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sess.Validate(json.RawMessage(tt.doc))
			var ve *ValidationError
			require.ErrorAs(t, err, &ve, "want a *ValidationError")
			require.ErrorIs(t, err, ErrInvalid)
			p := ve.Problems[0]
			assert.Equal(t, tt.at, p.InstanceLocation, "instance location (%v)", err)
			assert.True(t, strings.HasSuffix(p.KeywordLocation, tt.keyword), "keyword location = %q, want suffix %q (%v)", p.KeywordLocation, tt.keyword, err)
			if tt.keyword == "" {
				assert.Contains(t, p.Message, "not valid JSON", "want a JSON syntax complaint")
			}
		})
	}
}

func TestValidateKeepsBigIntegersExact(t *testing.T) {
	// 2^53+1 rounds to 2^53 as a float64 and would pass maximum 2^53.
	s, err := Compile(json.RawMessage(`{"type": "integer", "maximum": 9007199254740992}`), "big")
	require.NoError(t, err)
	require.ErrorIs(t, s.Validate(json.RawMessage(`9007199254740993`)), ErrInvalid, "Validate(2^53+1)")
	require.NoError(t, s.Validate(json.RawMessage(`9007199254740992`)), "Validate(2^53)")
}

func TestFormatsAreAsserted(t *testing.T) {
	msg := Project("message.json")
	err := msg.Validate(json.RawMessage(`{"role":"user","contents":[],"created_at":"yesterday"}`))
	require.ErrorIs(t, err, ErrInvalid, "want ErrInvalid for a bad date-time")
}

func TestValidateValue(t *testing.T) {
	type facts struct {
		SessionID string `json:"session_id"`
		StateKey  string `json:"state_key"`
	}
	s := Project("session-facts.json")
	require.NoError(t, s.ValidateValue(facts{SessionID: "s", StateKey: "k"}), "ValidateValue(struct)")
	require.ErrorIs(t, s.ValidateValue(facts{SessionID: "s"}), ErrInvalid, "ValidateValue(empty state_key)")
	require.NoError(t, s.ValidateValue(map[string]any{"session_id": "s", "state_key": "k"}), "ValidateValue(map)")
	require.ErrorIs(t, s.ValidateValue(map[string]any{"session_id": 1, "state_key": "k"}), ErrInvalid, "ValidateValue(bad map)")
}

func TestProjectSchemasAllCompile(t *testing.T) {
	for _, n := range schemas.Names() {
		assert.NotNil(t, Project(n), "Project(%q)", n)
	}
	assert.Nil(t, Project("nope.json"), "Project(nope.json)")
}

// TestProjectHammer compiles the project schemas from many goroutines at
// once, in different orders, so that -race sees the lazy compilation.
func TestProjectHammer(t *testing.T) {
	names := schemas.Names()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range names {
				n := names[(i+g*5)%len(names)]
				if s := Project(n); assert.NotNil(t, s, n) {
					assert.Equal(t, n, s.Name())
				}
			}
		})
	}
	wg.Wait()
}

func TestErrorListIsBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"type":"array","items":{"type":"string"}}`), "strings")
	require.NoError(t, err)
	err = s.Validate(json.RawMessage(`[1,2,3,4,5,6,7,8]`))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Problems, maxProblems, "problems")
	require.Equal(t, 8-maxProblems, ve.More, "more")
	require.ErrorContains(t, err, "and 3 more", "the error counts the rest")
}
