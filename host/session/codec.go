package session

import (
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/schemas"
)

// Decode reads a session that comes from outside the process (a
// file, a database row, a request) after checking it against
// schemas/session.json. Any problem is an error wrapping ErrInvalid
// that says what is wrong and where, as a JSON Pointer into the document:
//
//	host: invalid session: schema session.json: at /state/history: missing properties: 'data' (keyword session.json#/$defs/provider_state/required)
//
// Each slot's data is checked against its plugin's state_schema later, when
// a provider first uses it. encoding/json would decode the same bytes into
// the same Session; Decode only refuses what it should not accept.
func Decode(data []byte) (*Session, error) {
	if err := schema.Project(schemas.Session).Validate(data); err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	var s Session
	if err := json.Unmarshal(data, &s); err != nil {
		// Valid against the schema but not representable, e.g. a revision
		// written as 1.0: the schema calls it an integer, Go's int64 does not.
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	if err := s.readLastRunID(data); err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	if err := checkRuns(s.RecentRuns); err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	return &s, nil
}

// Encode writes a session as JSON (what json.Marshal writes) after
// checking that Decode will accept it again, so that a malformed
// session is refused when it is written rather than when it is read back.
func Encode(s *Session) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("session: %w: nil session", ErrInvalid)
	}
	if err := checkRuns(s.RecentRuns); err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	if err := schema.Project(schemas.Session).Validate(b); err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	return b, nil
}
