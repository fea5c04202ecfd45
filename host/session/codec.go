package session

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"

	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/internal/validset"
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
	if err := validate(data); err != nil {
		if rerr := revisionPastMax(data); rerr != nil {
			return nil, rerr
		}
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

// MaxRevision is the largest revision a session holds (schemas/session.json
// says so too): one below the largest int64, so that the commit that makes
// it does not overflow. A session at MaxRevision is read, listed and
// exported, but never committed again.
const MaxRevision = math.MaxInt64 - 1

// revisionPastMax explains a revision beyond MaxRevision, which the
// schema's own message would print as a rounded float.
func revisionPastMax(data []byte) error {
	var doc struct {
		Revision json.Number `json:"revision"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	rev, ok := new(big.Int).SetString(doc.Revision.String(), 10)
	if !ok || rev.Cmp(big.NewInt(MaxRevision)) <= 0 {
		return nil
	}
	return fmt.Errorf("session: %w: at /revision: %s is past the largest revision, %d, after which a commit would overflow a 64-bit integer: continue the conversation in a new session", ErrInvalid, rev, int64(MaxRevision))
}

// ErrRevisionExhausted reports a commit of a session at MaxRevision.
var ErrRevisionExhausted = fmt.Errorf("%w: the session is at its largest revision, %d, and cannot be committed again", ErrInvalid, int64(MaxRevision))

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
	if err := validate(b); err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrInvalid, err)
	}
	return b, nil
}

// validated remembers, by content, the last session documents
// schemas/session.json accepted in this process: a turn's commit encodes
// the session for its journal and the store encodes it again for its row,
// and the next turn loads that row, the same bytes each time. Checking
// them once instead of three times is about 7% of a turn through the sqlite
// plugin.
var validated validset.Set

// validate checks a session document against schemas/session.json unless
// it is one this process already checked, or one of the plain shape a turn
// commits (plainSession), which the schema accepts without a doubt.
func validate(doc []byte) error {
	if validated.Contains(doc) {
		return nil
	}
	if plainSession(doc) {
		validated.Add(doc)
		return nil
	}
	if err := schema.Project(schemas.Session).Validate(doc); err != nil {
		return err
	}
	validated.Add(doc)
	return nil
}
