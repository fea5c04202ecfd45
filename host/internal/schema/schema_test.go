package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema), "test")
			if !errors.Is(err, ErrBadSchema) {
				t.Fatalf("Compile = %v, want ErrBadSchema", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestCompileResolvesProjectSchemas(t *testing.T) {
	s, err := Compile(json.RawMessage(`{
		"type": "object",
		"properties": {"messages": {"type": "array", "items": {"$ref": "https://wasmhist.dev/schemas/v1/message.json"}}}
	}`), "state")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(json.RawMessage(`{"messages": [{"role": "user", "contents": [{"type": "text", "text": "hi"}]}]}`)); err != nil {
		t.Fatalf("valid state refused: %v", err)
	}
	err = s.Validate(json.RawMessage(`{"messages": [{"role": "user", "contents": []}, {"role": "robot", "contents": []}]}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate = %v, want *ValidationError wrapping ErrInvalid", err)
	}
	if got := ve.Problems[0].InstanceLocation; got != "/messages/1/role" {
		t.Fatalf("instance location = %q, want /messages/1/role (error: %v)", got, err)
	}
	if !strings.Contains(ve.Problems[0].KeywordLocation, "message.json#/properties/role/enum") {
		t.Fatalf("keyword location = %q, want the role enum of message.json", ve.Problems[0].KeywordLocation)
	}
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
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want *ValidationError wrapping ErrInvalid", err)
			}
			p := ve.Problems[0]
			if p.InstanceLocation != tt.at {
				t.Errorf("instance location = %q, want %q (%v)", p.InstanceLocation, tt.at, err)
			}
			if !strings.HasSuffix(p.KeywordLocation, tt.keyword) {
				t.Errorf("keyword location = %q, want suffix %q (%v)", p.KeywordLocation, tt.keyword, err)
			}
			if tt.keyword == "" && !strings.Contains(p.Message, "not valid JSON") {
				t.Errorf("message = %q, want a JSON syntax complaint", p.Message)
			}
		})
	}
}

func TestValidateKeepsBigIntegersExact(t *testing.T) {
	// 2^53+1 rounds to 2^53 as a float64 and would pass maximum 2^53.
	s, err := Compile(json.RawMessage(`{"type": "integer", "maximum": 9007199254740992}`), "big")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(json.RawMessage(`9007199254740993`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(2^53+1) = %v, want ErrInvalid", err)
	}
	if err := s.Validate(json.RawMessage(`9007199254740992`)); err != nil {
		t.Fatalf("Validate(2^53) = %v", err)
	}
}

func TestFormatsAreAsserted(t *testing.T) {
	msg := Project("message.json")
	err := msg.Validate(json.RawMessage(`{"role":"user","contents":[],"created_at":"yesterday"}`))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate = %v, want ErrInvalid for a bad date-time", err)
	}
}

func TestValidateValue(t *testing.T) {
	type facts struct {
		SessionID string `json:"session_id"`
		StateKey  string `json:"state_key"`
	}
	s := Project("session-facts.json")
	if err := s.ValidateValue(facts{SessionID: "s", StateKey: "k"}); err != nil {
		t.Fatalf("ValidateValue(struct) = %v", err)
	}
	if err := s.ValidateValue(facts{SessionID: "s"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ValidateValue(empty state_key) = %v, want ErrInvalid", err)
	}
	if err := s.ValidateValue(map[string]any{"session_id": "s", "state_key": "k"}); err != nil {
		t.Fatalf("ValidateValue(map) = %v", err)
	}
	if err := s.ValidateValue(map[string]any{"session_id": 1, "state_key": "k"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ValidateValue(bad map) = %v, want ErrInvalid", err)
	}
}

func TestProjectSchemasAllCompile(t *testing.T) {
	for _, n := range []string{"message.json", "session.json", "plugin-info.json", "store-response.json"} {
		if Project(n) == nil {
			t.Errorf("Project(%q) = nil", n)
		}
	}
	if Project("nope.json") != nil {
		t.Error("Project(nope.json) != nil")
	}
}

func TestErrorListIsBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"type":"array","items":{"type":"string"}}`), "strings")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(json.RawMessage(`[1,2,3,4,5,6,7,8]`))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v", err)
	}
	if len(ve.Problems) != maxProblems || ve.More != 8-maxProblems {
		t.Fatalf("problems = %d, more = %d; want %d and %d", len(ve.Problems), ve.More, maxProblems, 8-maxProblems)
	}
	if !strings.Contains(err.Error(), "and 3 more") {
		t.Fatalf("error %q does not count the rest", err)
	}
}
